"""What is said between the operator, the model and Steelframe, below Chat, the runtimes and
filing alike: the operator's phrasings (`phrasing`: the one grammar for "file this", "remember
that"), the intent trailer a reply ends with (`trailer`), issue and session titles made from
messages (`titles`) and the sentence a reply opens with when memory has no answer. It imports
nothing of ours, so the offline runtime and the filing policy read requests the same way
without importing Chat."""

# What a reply says first when memory does not answer the question (docs/memory.md,
# Answerability); the offline runtime says it verbatim, a model is told to.
NOTHING_ANSWERS = "Session memory has nothing that answers this"
