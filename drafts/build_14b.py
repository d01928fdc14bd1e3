# ruff: noqa: E501 (markdown and LaTeX lines of the lesson are kept whole)
"""Builds drafts/14b_sections.ipynb (lesson 14, sections 5-7 and exercise 2) with stable cell ids 14-b-NNN.

    python drafts/build_14b.py && python tools/run_notebooks.py drafts/14b_sections.ipynb
"""

from pathlib import Path

import nbformat

CELLS = []


def md(text, collapsed=False):
    CELLS.append(("markdown", text.strip("\n"), [], collapsed))


def code(text, tags=()):
    CELLS.append(("code", text.strip("\n"), list(tags), False))


code('''
%matplotlib inline
import torch
import torch.nn.functional as F

import attention_lab as al
from attention_lab import reference
from attention_lab.measure.conclusions import growth
from attention_lab.measure.results import read_results
from attention_lab.teaching.checks import lesson14 as check

al.seed_everything(0)
torch.set_num_threads(1)  # tiny tensors: a second thread mostly waits
''')

# ---- 5. local and global layers ----
md('''
## 5. Local and global layers, interleaved

Every global layer's KV cache grows with the context. A local (sliding-window) layer keeps only its last `window`
positions, however long the context. Gemma 3 stacks five local layers (window 1,024) for every global one. A stack's
cache is lesson 11's arithmetic summed over its layers, each at its own length. Here Llama-3-8B's sizes (32 layers,
8 key/value heads of 128, bf16) are made 5:1:
''')
code('''
windows = al.interleaved_windows(32, window=1024, local_per_global=5)  # an int: local layer; None: global
print(al.layer_pattern(windows))
per_position = 2 * 8 * 128 * 2  # a key and a value, 8 key/value heads of 128 numbers, 2 bytes each
lengths, stack, everything = [1024, 8192, 131072], [], []
for n in lengths:
    by_hand = sum(per_position * (n if w is None else min(n, w)) for w in windows)
    library = al.interleaved_kv_cache_bytes(windows, num_kv_heads=8, head_dim=128, seq_len=n)
    assert by_hand == library == reference.interleaved_kv_cache_bytes(windows, num_kv_heads=8, head_dim=128,
                                                                       seq_len=n)
    stack.append(library)
    everything.append(al.kv_cache_bytes(num_layers=32, num_kv_heads=8, head_dim=128, seq_len=n))
    print(f"n = {n:>7,}: 5:1 stack {library / 2**20:6,.0f} MiB, all global {everything[-1] / 2**20:6,.0f} MiB, "
          f"ratio {library / everything[-1]:.3f}")
print(growth(lengths, stack, name="the 5:1 stack's cache").message)
print(growth(lengths, everything, name="the all-global cache").message)
''')
md('''
What does a model lose? `benchmarks/interleaved_recall.py` trains lesson 10's recall model with local and global
layers in several patterns, over several seeds: too long to run here, so the cell reads the committed file.
''')
code('''
recall = read_results("interleaved_recall.csv")
print(recall.machine if recall.rows else recall.missing)
accuracy = {}
for row in recall.rows:
    accuracy.setdefault(row["pattern"], []).append(float(row["accuracy"]))
first = recall.rows[0]
window = int(first["window"])
print(f"{first['layers']} layers, window {window}, n = {first['n']}, {first['steps']} steps, chance 0.25; "
      f"{first['layers']} local layers reach {int(first['layers']) * (window - 1)} positions each way")
means = {pattern: sum(values) / len(values) for pattern, values in accuracy.items()}
for pattern, values in accuracy.items():
    print(f"  {pattern}: mean accuracy {means[pattern]:.3f}, seeds {min(values):.3f} ... {max(values):.3f}")
print("from the lowest mean accuracy to the highest:", ", ".join(sorted(means, key=means.get)))
''')
md('''
Without a global layer the pairs are out of reach. With one, where it sits matters in a model this small: compare
the patterns with the global layer first and last. Gemma 3's own measurement (perplexity against the local:global
ratio) is at a scale this course cannot train.
''')

# ---- 6. gated delta rule ----
md('''
## 6. Gated DeltaNet: a fixed-size state that overwrites

Lesson 10's linear attention keeps a state $S=\\sum_j \\phi(k^j) {v^j}^\\top$ and only adds to it: a key written twice
reads back a mix of both values. The **delta rule** first reads what $S$ holds for $k^t$ and writes only the
difference; Gated DeltaNet (Qwen3-Next, and Kimi Linear's variant) also decays $S$ by a gate $\\alpha_t$:

$$S_t = \\alpha_t\\,(I-\\beta_t\\, k^t {k^t}^\\top)\\, S_{t-1} + \\beta_t\\, k^t {v^t}^\\top, \\qquad b^t = S_t^\\top q^t.$$
''')
code('''
g = torch.Generator().manual_seed(0)
n, d, dv = 6, 4, 3
q = torch.randn(n, d, generator=g, dtype=torch.float64)
k = F.normalize(torch.randn(n, d, generator=g, dtype=torch.float64), dim=-1)  # unit keys, as the papers use
v = torch.randn(n, dv, generator=g, dtype=torch.float64)
beta = torch.rand(n, generator=g, dtype=torch.float64)  # how much to write, in [0, 1]
alpha = 0.9 + 0.1 * torch.rand(n, generator=g, dtype=torch.float64)  # how much to keep, in (0, 1]

S, outputs = torch.zeros(d, dv, dtype=torch.float64), []
for t in range(n):
    S = alpha[t] * S  # decay
    read = S.T @ k[t]  # what S holds for k^t
    S = S + beta[t] * torch.outer(k[t], v[t] - read)  # write the difference
    outputs.append(S.T @ q[t])  # b^t = S_t^T q^t
by_hand = torch.stack(outputs)
torch.testing.assert_close(al.gated_delta_rule_recurrent(q, k, v, beta, alpha)[0], by_hand)
torch.testing.assert_close(al.gated_delta_rule(q, k, v, beta, alpha, chunk_size=4), by_hand)  # in chunks
torch.testing.assert_close(reference.gated_delta_rule(q, k, v, beta, alpha), by_hand)
print("by hand = recurrent = chunked = reference, outputs of shape", tuple(by_hand.shape))
''')
md('''
The measurement: write 8 random unit keys of 32 numbers, then write 4 of them again with new values, and read every
key back. The right answer is each key's latest value.
''')
code('''
g = torch.Generator().manual_seed(1)
keys = F.normalize(torch.randn(8, 32, generator=g, dtype=torch.float64), dim=-1)
old, new = torch.randn(8, 8, generator=g, dtype=torch.float64), torch.randn(4, 8, generator=g, dtype=torch.float64)
written_k, written_v = torch.cat([keys, keys[:4]]), torch.cat([old, new])  # 12 writes
latest = torch.cat([new, old[4:]])
ones = torch.ones(12, dtype=torch.float64)
_, state = al.gated_delta_rule(written_k, written_k, written_v, ones, ones, return_state=True)  # beta = alpha = 1
reads = {"delta rule": keys @ state, "linear attention (lesson 10)": al.linear_attention(keys, written_k, written_v)}
errors = {name: float(((r - latest).norm(dim=-1) / latest.norm(dim=-1)).mean()) for name, r in reads.items()}
for name, error in errors.items():
    print(f"{name:<29} mean relative error against the latest values: {error:.3f}")
better = min(errors, key=errors.get)
print(f"closer to the latest values: {better} ({errors[better] / max(errors.values()):.2f} of the other's error)")
''')
md('''
Both states have a fixed size. Qwen3-Next-80B-A3B (its published configuration) has 48 layers: 12 of attention
(2 key/value heads of 256) and 36 of Gated DeltaNet (32 heads, states of 128 x 128). Its memory per sequence in bf16:
''')
code('''
lengths = [4096, 32768, 262144]
states = al.delta_rule_state_bytes(num_layers=36, num_heads=32, key_dim=128, value_dim=128)
caches = [al.kv_cache_bytes(num_layers=12, num_kv_heads=2, head_dim=256, seq_len=n) for n in lengths]
all_attention = [al.kv_cache_bytes(num_layers=48, num_kv_heads=2, head_dim=256, seq_len=n) for n in lengths]
for n, cache, full in zip(lengths, caches, all_attention):
    print(f"n = {n:>7,}: delta-rule states {states / 2**20:5.0f} MiB + attention caches {cache / 2**20:6,.0f} MiB; "
          f"48 attention layers {full / 2**20:6,.0f} MiB")
print(growth(lengths, [states] * len(lengths), name="the delta-rule states").message)
print(growth(lengths, caches, name="the attention caches").message)
''')

# ---- 7. learned sparse attention ----
md('''
## 7. Learned sparse attention: a lightning indexer picks the keys

DeepSeek-V3.2 scores every earlier key with a small **lightning indexer**,
$I_{t,s}=\\sum_h w_{t,h}\\,\\mathrm{ReLU}(q^I_{t,h}\\cdot k^I_s)$, keeps each query's top-k keys (2,048 in the
paper) and runs exact attention on those only. NSA picks blocks of keys instead. The indexer first learns to imitate
dense attention: its loss is the KL divergence from the attention's weights to the softmax of its scores.
''')
code('''
g = torch.Generator().manual_seed(2)
q_index, k_index = torch.randn(2, 5, 3, generator=g), torch.randn(5, 3, generator=g)  # 2 indexer heads, d_I = 3
w = torch.randn(2, 5, generator=g)
by_hand = (w[0, :, None] * torch.relu(q_index[0] @ k_index.T) + w[1, :, None] * torch.relu(q_index[1] @ k_index.T))
torch.testing.assert_close(al.lightning_index_scores(q_index, k_index, w), by_hand)
qkv = torch.randn(3, 1, 2, 5, 4, generator=g)  # q, k, v: batch 1, 2 heads, 5 tokens
dense = F.scaled_dot_product_attention(*qkv)
torch.testing.assert_close(al.indexed_sparse_attention(*qkv, by_hand[None], top_k=5), dense)  # every key kept
print("index scores by hand = library; top_k = every key gives dense attention")
''')
md('''
The measurement: 2 heads of $d=8$ on 128 tokens, their scores of rank 4 (so that an indexer of 2 heads of
$d_I=4$ can match them), top-16 keys. The indexer is trained 100 steps on fresh sequences; then each selection's
output is compared with dense attention on held-out ones: random keys, the untrained indexer, the trained one,
and the best 16 by the true weights (oracle).
''')
code('''
e, h, d, n, top_k = 16, 2, 8, 128, 16
g = torch.Generator().manual_seed(0)
u = torch.cat([torch.linalg.qr(torch.randn(e - 1, 4, generator=g))[0], torch.zeros(1, 4)])  # 4 directions
w_q, w_k = (u @ torch.randn(4, h * d, generator=g) for _ in range(2))  # scores of rank 4
w_v = torch.randn(e, h * d, generator=g) / e**0.5


def tokens(batch, generator):
    x = torch.randn(batch, n, e, generator=generator)
    x[..., -1] = 1.0  # a constant feature (real hidden states have some): the indexer's weights can use it
    return x


def heads(x, weight):
    return (x @ weight).unflatten(-1, (h, d)).transpose(1, 2)  # (b, h, i, d)


def weights_of(x):
    scores = heads(x, w_q) @ heads(x, w_k).transpose(-2, -1) / d**0.5
    return scores.masked_fill(~al.causal_mask(n), float("-inf")).softmax(-1)  # (b, h, i, j)


torch.manual_seed(0)
indexer = al.LightningIndexer(e, 2, 4, causal=True)
x_test = tokens(8, torch.Generator().manual_seed(100))
q, k, v = heads(x_test, w_q), heads(x_test, w_k), heads(x_test, w_v)
exact = F.scaled_dot_product_attention(q, k, v, is_causal=True)


def error(index_scores):
    out = al.indexed_sparse_attention(q, k, v, index_scores, top_k=top_k, causal=True)
    return float((out - exact).norm() / exact.norm())


with torch.no_grad():
    errors = {"random keys": error(torch.rand(8, n, n, generator=torch.Generator().manual_seed(7))),
              "untrained indexer": error(indexer(x_test))}
optimizer, stream = torch.optim.Adam(indexer.parameters(), lr=3e-2), torch.Generator().manual_seed(0)
for _ in range(100):
    x = tokens(4, stream)
    loss = al.indexer_distillation_loss(indexer(x), weights_of(x))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with torch.no_grad():
    errors["trained indexer"] = error(indexer(x_test))
    errors["oracle top-16"] = error(weights_of(x_test).sum(1))
for name, value in errors.items():
    print(f"{name:<18} relative error against dense attention {value:.3f}")
# seeds 0-2 (data, weights, indexer): trained 0.19-0.33, random 0.76-0.81, oracle 0.12-0.17 on this machine
assert errors["trained indexer"] < 0.6 * errors["random keys"] and errors["oracle top-16"] < errors["trained indexer"]
print("the trained indexer's keys are far better than random ones, and the oracle's better still")
''', tags=["nbval-ignore-output"])
code('''
indexer_flops, sparse_flops, dense_flops = al.indexed_attention_flops(n, n, top_k=top_k, num_heads=h, head_dim=d,
                                                                      index_heads=2, index_dim=4)
print(f"work against dense attention: indexer {indexer_flops / dense_flops:.3f}, attention on top-{top_k} "
      f"{sparse_flops / dense_flops:.3f}, together {(indexer_flops + sparse_flops) / dense_flops:.3f}")
''')
md('''
The indexer still scores every pair, so its work grows with $n^2$ too, but per pair it is a few numbers against
the attention's $2d$ per head (DeepSeek computes it in FP8); the attention itself now reads top-k keys per query
instead of $n$.
''')

# ---- deep dives ----
md('''
## Deep dive: the delta rule in chunks
The recurrence is a loop over positions; its chunked form turns a chunk's loop into matrix products.
''', collapsed=True)
md('''
Inside a chunk of $C$ positions, with $\\gamma_r=\\alpha_1\\cdots\\alpha_r$ and the state $S_0$ at the chunk's start,
unrolling the update gives $S_r = \\gamma_r S_0 + \\sum_{s\\le r} \\frac{\\gamma_r}{\\gamma_s} k^s {u^s}^\\top$, where the
written vectors $u^s$ satisfy

$$u^r + \\beta_r \\sum_{s<r} \\frac{\\gamma_r}{\\gamma_s}(k^r\\cdot k^s)\\, u^s = \\beta_r\\,(v^r - \\gamma_r S_0^\\top k^r):$$

one unit lower-triangular system per chunk (the UT transform of Yang et al. 2024), solved by
`torch.linalg.solve_triangular`. Then $b^r=\\gamma_r S_0^\\top q^r + \\sum_{s\\le r}\\frac{\\gamma_r}{\\gamma_s}(q^r\\cdot k^s)\\,u^s$.
The ratios $\\gamma_r/\\gamma_s$ are taken as exp of differences of cumulative log-gates, so they never overflow.
`al.gated_delta_rule(..., chunk_size=C)` does this; `chunk_size=1` is the recurrence, `chunk_size=n` one pass.
''')
code('''
g = torch.Generator().manual_seed(3)
q, v = torch.randn(2, 97, 8, generator=g, dtype=torch.float64), torch.randn(2, 97, 5, generator=g, dtype=torch.float64)
k = F.normalize(torch.randn(2, 97, 8, generator=g, dtype=torch.float64), dim=-1)
beta, alpha = torch.rand(2, 97, generator=g, dtype=torch.float64), 0.5 + 0.5 * torch.rand(2, 97, generator=g,
                                                                                           dtype=torch.float64)
recurrent = al.gated_delta_rule_recurrent(q, k, v, beta, alpha)[0]
for chunk in (1, 16, 97):
    torch.testing.assert_close(al.gated_delta_rule(q, k, v, beta, alpha, chunk_size=chunk), recurrent)
print("chunks of 1, 16 and 97 positions give the recurrence's outputs for n = 97")
''')

# ---- exercise 2 ----
md('''
## Exercise 2: the cache of a stack the lesson did not show

Gemma 2 alternates local and global layers one to one. Write `stack_cache_bytes(num_layers, local_per_global, window,
seq_len, num_kv_heads, head_dim, bytes_per_value)`: the KV-cache bytes of one sequence in a stack that repeats
`local_per_global` local layers (each keeps at most `window` positions) then one global layer; a depth that is not a
multiple of the group ends with local layers. Do the arithmetic yourself (no library call). The example: Gemma 2
9B's published configuration, 42 layers, 8 key/value heads of 256, window 4,096, at 8,192 tokens in bf16.
''')
code('''
def stack_cache_bytes(num_layers, local_per_global, window, seq_len, num_kv_heads, head_dim, bytes_per_value):
    ### BEGIN SOLUTION
    global_layers = num_layers // (local_per_global + 1)
    local_layers = num_layers - global_layers
    kept = global_layers * seq_len + local_layers * min(seq_len, window)  # positions over all layers
    return 2 * num_kv_heads * head_dim * bytes_per_value * kept
    ### END SOLUTION
''')
code('''
check.stack_cache_bytes(stack_cache_bytes)
''')

nb = nbformat.v4.new_notebook()
nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
               "language_info": {"name": "python"}}
for index, (kind, source, tags, collapsed) in enumerate(CELLS):
    cell = nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source)
    cell["id"] = f"14-b-{index:03d}"
    if tags:
        cell.metadata["tags"] = tags
    if collapsed:
        cell.metadata["jp-MarkdownHeadingCollapsed"] = True
    nb.cells.append(cell)
# a deep dive's body cell carries the heading's id and "-b" (CONTRIBUTING, "Writing a deep dive")
for previous, cell in zip(nb.cells, nb.cells[1:]):
    if previous.metadata.get("jp-MarkdownHeadingCollapsed") and cell.cell_type == "markdown":
        cell["id"] = previous["id"] + "-b"
nbformat.write(nb, Path(__file__).with_name("14b_sections.ipynb"))
