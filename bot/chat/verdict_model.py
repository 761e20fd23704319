"""The calibrated answerability verdict's coefficients (docs/memory.md, Answerability).

Fitted by the verdict helper (the grounding helper's features and C, refitted unchanged)
with `python -m bench.quality --fit-verdict` (bench/verdict_fit.py) on 2026-12-05, from
the evidence of the tuning part of tests/data/grounding_set.json only (224 questions
through the chat turn, 20 of them no-answer): a logistic regression (scikit-learn, C=10.0,
balanced classes) over the standardised features, the threshold midway between the highest
tuning no-answer score and the next answerable one. On the tuning part it says "nothing"
to 20 of 20 no-answer questions and to 25 of 204 answerable ones. Cross-validated (5 folds
x 20; per repeat, no-answer questions said to be answered and answerable ones said
"nothing"): this model 2.00 and 23.7, the hand grid it replaced 2.25 and 30.4. The
features and C are bench/verdict_fit.py's (which says who chose them and on what). Refit
with the same command; do not edit by hand.
"""

FEATURES = ("coverage", "best", "missing_peak", "unknown_share", "log_terms")
MEAN = (0.713408, 0.358113, 0.158841, 0.135728, 1.62396)
SCALE = (0.285837, 0.157373, 0.162098, 0.21486, 0.351777)
COEF = (4.13387, -0.870969, 0.401325, -0.3282, 1.94337)
INTERCEPT = 3.22874
THRESHOLD = 0.60864
