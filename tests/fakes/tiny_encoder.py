"""A tiny BERT-shaped encoder with random weights, written as ONNX with the `onnx` package's
helper API, and a WordPiece `tokenizer.json` made with `tokenizers`: the directory the `onnx`
embeddings provider loads (bot/chat/embeddings_onnx.py), built in a test's temp dir so no
real weights are ever needed or committed.

The graph is BERT's, one layer of it: word + position + token-type embeddings, LayerNorm, one
self-attention head whose scores the attention mask blanks out, a residual LayerNorm, a ReLU
feed-forward and another residual LayerNorm; inputs `input_ids`, `attention_mask`,
`token_type_ids` (int64, [batch, tokens]), output `last_hidden_state` ([batch, tokens,
WIDTH]). A padded position therefore changes nothing the provider should keep: what the
provider's masking and pooling must get right, a real encoder's way.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

WIDTH = 16
POSITIONS = 512  # BERT's: more than the provider's default cut of 256 tokens
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
WORDS = (
    "the a an of to and in on is was why who what which how did does do we our it its for "
    "with from at by be not no this that job jobs export exports time out timeout large "
    "ledger ledgers login page search box footer review notes needs broker listener night "
    "restart restarts certificate doctor child fever kids high temperature sees treats"
).split()


def write(
    directory: Path, *, seed: int = 7, pooling: str | None = None, max_seq_length: int | None = None
) -> Path:
    """The model directory: model.onnx, tokenizer.json and, when asked, sentence-transformers'
    pooling and length configs."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab = {token: index for index, token in enumerate([*SPECIALS, *WORDS, "##s", "##ed"])}
    onnx.save(_graph(len(vocab), np.random.default_rng(seed)), str(directory / "model.onnx"))
    _tokenizer(vocab).save(str(directory / "tokenizer.json"))
    if pooling is not None:
        (directory / "1_Pooling").mkdir(exist_ok=True)
        config = {
            "word_embedding_dimension": WIDTH,
            "pooling_mode_cls_token": pooling == "cls",
            "pooling_mode_mean_tokens": pooling == "mean",
        }
        (directory / "1_Pooling" / "config.json").write_text(json.dumps(config))
    if max_seq_length is not None:
        config = {"max_seq_length": max_seq_length, "do_lower_case": False}
        (directory / "sentence_bert_config.json").write_text(json.dumps(config))
    return directory


def _tokenizer(vocab: dict[str, int]) -> Tokenizer:
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return tokenizer


def _graph(vocab_size: int, rng: np.random.Generator) -> onnx.ModelProto:
    weights: list[TensorProto] = []

    def tensor(name: str, *shape: int, scale: float = 0.5) -> str:
        values = (rng.standard_normal(shape) * scale).astype(np.float32)
        weights.append(numpy_helper.from_array(values, name))
        return name

    def const(name: str, values: np.ndarray) -> str:
        weights.append(numpy_helper.from_array(values, name))
        return name

    ones, zeros = np.ones(WIDTH, np.float32), np.zeros(WIDTH, np.float32)
    for n in (1, 2, 3):
        const(f"ln{n}_scale", ones)
        const(f"ln{n}_bias", zeros)
    const("one_i", np.array(1, np.int64))
    const("zero_i", np.array(0, np.int64))
    const("one_f", np.array(1.0, np.float32))
    const("blank", np.array(-1e4, np.float32))
    const("scale", np.array(1 / np.sqrt(WIDTH), np.float32))
    const("axis_1", np.array([1], np.int64))
    nodes = [
        helper.make_node("Gather", [tensor("word", vocab_size, WIDTH), "input_ids"], ["w"]),
        helper.make_node("Gather", [tensor("type", 2, WIDTH), "token_type_ids"], ["t"]),
        helper.make_node("Shape", ["input_ids"], ["shape"]),
        helper.make_node("Gather", ["shape", "one_i"], ["tokens"], axis=0),
        helper.make_node("Range", ["zero_i", "tokens", "one_i"], ["positions"]),
        helper.make_node("Gather", [tensor("position", POSITIONS, WIDTH), "positions"], ["p"]),
        helper.make_node("Add", ["w", "t"], ["wt"]),
        helper.make_node("Add", ["wt", "p"], ["embedded"]),
        helper.make_node(
            "LayerNormalization", ["embedded", "ln1_scale", "ln1_bias"], ["x"], axis=-1
        ),
        # one attention head; a masked key gets -1e4 before the softmax
        helper.make_node("MatMul", ["x", tensor("wq", WIDTH, WIDTH)], ["q"]),
        helper.make_node("MatMul", ["x", tensor("wk", WIDTH, WIDTH)], ["k"]),
        helper.make_node("MatMul", ["x", tensor("wv", WIDTH, WIDTH)], ["v"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["qk"]),
        helper.make_node("Mul", ["qk", "scale"], ["scores"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "axis_1"], ["mask_b"]),
        helper.make_node("Sub", ["one_f", "mask_b"], ["masked"]),
        helper.make_node("Mul", ["masked", "blank"], ["penalty"]),
        helper.make_node("Add", ["scores", "penalty"], ["blanked"]),
        helper.make_node("Softmax", ["blanked"], ["attention"], axis=-1),
        helper.make_node("MatMul", ["attention", "v"], ["context"]),
        helper.make_node("MatMul", ["context", tensor("wo", WIDTH, WIDTH)], ["attended"]),
        helper.make_node("Add", ["x", "attended"], ["residual1"]),
        helper.make_node(
            "LayerNormalization", ["residual1", "ln2_scale", "ln2_bias"], ["y"], axis=-1
        ),
        helper.make_node("MatMul", ["y", tensor("w1", WIDTH, 2 * WIDTH)], ["up"]),
        helper.make_node("Relu", ["up"], ["act"]),
        helper.make_node("MatMul", ["act", tensor("w2", 2 * WIDTH, WIDTH)], ["down"]),
        helper.make_node("Add", ["y", "down"], ["residual2"]),
        helper.make_node(
            "LayerNormalization",
            ["residual2", "ln3_scale", "ln3_bias"],
            ["last_hidden_state"],
            axis=-1,
        ),
    ]
    ids = ["batch", "sequence"]
    graph = helper.make_graph(
        nodes,
        "tiny_bert",
        [
            helper.make_tensor_value_info(name, TensorProto.INT64, ids)
            for name in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*ids, WIDTH])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by any onnxruntime of the last few years
    onnx.checker.check_model(model)
    return model
