"""The plain math of every attention the package computes: slow, obviously correct, no tricks.

Each function is a few lines in Lee's notation (q^i, k^j, alpha_{i,j}, b^i), base e, nothing in place. The fast
paths elsewhere in the package are tested against these (values and gradients, fp64), and the lessons show these
first. A query with no allowed key gets zeros, as everywhere in the package.
"""

from ._attention import (
    attention,
    attention_flops,
    block_sparse_attention,
    blockwise_attention,
    cluster_attention,
    grouped_query_attention,
    kv_cache_bytes,
    latent_attention,
    linear_attention,
    linformer_attention,
    performer_attention,
    rope,
    sliding_window_attention,
    synthesizer_attention,
    topk_attention,
)
from ._images import conv_as_attention
from ._recurrent_and_sparse import (
    gated_delta_rule,
    indexed_sparse_attention,
    interleaved_kv_cache_bytes,
    lightning_index_scores,
)
from ._stabilizers import (
    attention_with_sinks,
    gated_attention,
    qk_norm_attention,
    rms_norm,
    softcap,
    streaming_attention,
)

__all__ = [
    "attention", "blockwise_attention", "block_sparse_attention", "linear_attention", "performer_attention",
    "topk_attention", "cluster_attention", "linformer_attention", "synthesizer_attention", "rope",
    "grouped_query_attention", "latent_attention", "sliding_window_attention", "kv_cache_bytes", "attention_flops",
    "conv_as_attention",
    "attention_with_sinks", "softcap", "rms_norm", "qk_norm_attention", "gated_attention", "streaming_attention",
]
__all__ += ["interleaved_kv_cache_bytes", "gated_delta_rule", "lightning_index_scores", "indexed_sparse_attention"]
