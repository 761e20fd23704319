"""The calibrated answerability verdict's coefficients (docs/memory.md, Answerability).

Fitted by the verdict3 helper (the kind of answer asked for, variant K1) with `python -m
bench.quality --fit-verdict` (bench/verdict_fit.py) on 2026-12-05, from the evidence of
tuning data only, asked through the chat turn: the tuning part of
tests/data/grounding_set.json (224 questions, 20 no-answer; said "nothing" to 20 of them
and to 18 of 204 answerable ones). A logistic regression (scikit-learn, C=10.0, balanced
classes, each question weighing the same) over the standardised features, the threshold
midway between the highest no-answer score and the next answerable one. In all it says
"nothing" to 20 of 20 no-answer questions and to 18 of 204 answerable ones.
Cross-validated (5 folds x 20, stratified by set and class; per repeat, no-answer
questions said to be answered and answerable ones said "nothing"): this model 2.25 and
18.4, the hand grid 2.25 and 30.4. The features, C and threshold rule are
bench/verdict_fit.py's (which says who chose them and on what). Refit with the same
command; do not edit by hand.
"""

FEATURES = ("coverage", "best", "missing_peak", "unknown_share", "log_terms", "kind_missing")
MEAN = (0.713408, 0.358113, 0.158841, 0.135728, 1.62396, 0.00446429)
SCALE = (0.285837, 0.157373, 0.162098, 0.21486, 0.351777, 0.066666)
COEF = (6.34357, -1.61196, 1.67761, 0.0348682, 2.68509, -0.65723)
INTERCEPT = 4.03696
THRESHOLD = 0.559073
