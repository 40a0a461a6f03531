"""A tiny random-weight llama-architecture GGUF for tests (≈460 KB, written in a few milliseconds).

It has a byte-fallback SentencePiece vocabulary (3 control tokens + the 256 byte tokens, so any text
tokenises) and a chat template, so llama.cpp loads it in milliseconds, applies the template, generates
(nonsense) and follows a grammar: the real loading, generation, grammar and timeout code runs in unit
tests without a real model. Needs the ``gguf`` package (installed by ``make install``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# Plain text, so that the byte vocabulary can spell it; llama-cpp-python renders it with Jinja.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def write_tiny_llama(path: Path, *, seed: int = 0, n_embd: int = 64, n_layer: int = 2, n_head: int = 4,
                     n_ff: int = 128, context_length: int = 2048) -> Path:
    """Write the tiny model to ``path`` and return ``path``. Same arguments, same bytes."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{b:02X}>".encode() for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    n_vocab = len(tokens)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("kumiho-ce tiny test model (random weights)")
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * n_vocab)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_chat_template(CHAT_TEMPLATE)

    def weight(*shape: int) -> np.ndarray:  # numpy shape is (out, in): GGUF stores it reversed
        return np.asarray(rng.standard_normal(shape) * 0.5 / np.sqrt(shape[-1]), dtype=np.float32)

    writer.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", weight(n_vocab, n_embd))
    for i in range(n_layer):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{i}.{name}.weight", weight(n_embd, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(n_embd, n_ff))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
