"""Images as tokens, and the two small image models of lesson 13: a Vision Transformer and a CNN of about its size.

Lee's lecture: an image is a set of vectors. :func:`patchify` cuts it into square patches, each patch's pixels one
vector (a token), as the Vision Transformer does ("An Image is Worth 16x16 Words", Dosovitskiy et al., 2021);
:func:`unpatchify` puts the patches back. :class:`TinyViT` embeds the patches, adds a learned position to each and
a class token in front, runs the lessons' own :class:`~attention_lab.models.transformer.TransformerBlock` (lesson
08's blocks, lesson 05's multi-head attention) and classifies from the class token. :class:`TinyCNN` is two 3 x 3
convolutions with max pooling and a linear layer, built to about the same number of parameters.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from .._validation import check_bool, check_positive_int, check_positive_ints, check_tensor, fail
from .transformer import TransformerBlock

__all__ = ["TinyCNN", "TinyViT", "patchify", "unpatchify"]


def _check_images(fn: str, images: object, patch: int | None = None) -> torch.Tensor:
    """Images as ``(b, c, H, W)``: a floating tensor of 3 axes (grey, ``(b, H, W)``) or 4, H and W multiples of
    ``patch``."""
    check_tensor(fn, "images", images, floating=True)
    if images.dim() not in (3, 4):
        fail(fn, f"images must have shape (b, H, W) for grey images or (b, c, H, W), got shape "
                 f"{tuple(images.shape)}; for one image add the batch axis with images.unsqueeze(0)")
    images = images[:, None] if images.dim() == 3 else images  # (b, c, H, W)
    if patch is not None and (images.shape[-2] % patch or images.shape[-1] % patch):
        fail(fn, f"the image's height and width must be multiples of patch={patch}, got H={images.shape[-2]}, "
                 f"W={images.shape[-1]}; crop or pad the images, or pick a patch size that divides both")
    return images


def patchify(images: torch.Tensor, patch: int) -> torch.Tensor:
    """Cut each image into ``patch`` x ``patch`` squares, row by row; each square's pixels (and channels) become one
    vector. Patch t is the square at grid row ``t // (W / patch)``, column ``t % (W / patch)``.

    Shape: images ``(b, H, W)`` (grey) or ``(b, c, H, W)`` -> tokens ``(b, n, d)`` with
        ``n = (H / patch) * (W / patch)`` and ``d = patch * patch * c``.
    """
    fn = "patchify"
    check_positive_int(fn, "patch", patch)
    images = _check_images(fn, images, patch)  # (b, c, H, W)
    return rearrange(images, "b c (gh p1) (gw p2) -> b (gh gw) (p1 p2 c)", p1=patch, p2=patch)  # (b, n, d)


def unpatchify(tokens: torch.Tensor, height: int, width: int, patch: int, channels: int | None = None
               ) -> torch.Tensor:
    """The inverse of :func:`patchify`: the images back from their patches. ``channels=None`` means grey images,
    returned without a channel axis.

    Shape: tokens ``(b, n, d)`` with ``n = (height / patch) * (width / patch)``, ``d = patch * patch * c``
        -> images ``(b, height, width)`` (``channels=None``) or ``(b, c, height, width)``.
    """
    fn = "unpatchify"
    check_positive_ints(fn, height=height, width=width, patch=patch)
    c = 1 if channels is None else check_positive_int(fn, "channels", channels)
    check_tensor(fn, "tokens", tokens)
    if height % patch or width % patch:
        fail(fn, f"height and width must be multiples of patch={patch}, got height={height}, width={width}; pass "
                 f"the sizes of the images the tokens came from")
    n, d = (height // patch) * (width // patch), patch * patch * c
    if tokens.dim() != 3 or tuple(tokens.shape[1:]) != (n, d):
        fail(fn, f"tokens must have shape (b, {n}, {d}) for {height} x {width} images of {c} channel(s) in "
                 f"{patch} x {patch} patches, got shape {tuple(tokens.shape)}; pass the sizes patchify was given")
    images = rearrange(tokens, "b (gh gw) (p1 p2 c) -> b c (gh p1) (gw p2)", gh=height // patch, p1=patch,
                       p2=patch)  # (b, c, H, W)
    return images[:, 0] if channels is None else images  # (b, H, W) or (b, c, H, W)


class TinyViT(nn.Module):
    """A Vision Transformer of a few thousand parameters: patches -> tokens -> Transformer blocks -> class.

    ``forward(images, need_weights=False)`` embeds each patch (``nn.Linear(d, e)``), puts a learned class token at
    position 0, adds a learned position to every token, runs ``num_layers`` pre-norm
    :class:`~attention_lab.models.transformer.TransformerBlock` s and classifies the class token's output after a
    final LayerNorm. It returns ``(logits, weights)``: with ``need_weights=True`` the attention of every layer and
    head (query and key 0 are the class token, then the patches row by row), else None.

    Attributes: ``image_size``, ``patch``, ``channels``, ``num_patches``, ``patch_embedding``, ``class_token``
    ``(1, 1, e)``, ``positions`` ``(1, 1 + n, e)``, ``layers``, ``final_norm``, ``head``.

    Shape: images ``(b, H, W)`` or ``(b, c, H, W)`` with ``H = W = image_size`` -> logits ``(b, classes)``,
        weights ``(layers, b, h, 1 + n, 1 + n)`` or None.
    """

    def __init__(self, *, image_size: int = 8, patch: int = 2, channels: int = 1, dim: int = 16, num_heads: int = 2,
                 num_layers: int = 1, d_ff: int = 32, classes: int = 10) -> None:
        super().__init__()
        fn = "TinyViT"
        check_positive_ints(fn, image_size=image_size, patch=patch, channels=channels, dim=dim, num_heads=num_heads,
                            num_layers=num_layers, d_ff=d_ff, classes=classes)
        if image_size % patch:
            fail(fn, f"image_size must be a multiple of patch, got image_size={image_size}, patch={patch}; pick a "
                     f"patch size that divides the image size")
        if dim % num_heads:
            fail(fn, f"dim must be divisible by num_heads, got dim={dim}, num_heads={num_heads}; each head takes "
                     f"dim / num_heads features")
        self.image_size, self.patch, self.channels = image_size, patch, channels
        self.num_patches = (image_size // patch) ** 2
        self.patch_embedding = nn.Linear(patch * patch * channels, dim)
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.positions = nn.Parameter(torch.randn(1, 1 + self.num_patches, dim) * 0.02)
        self.layers = nn.ModuleList(TransformerBlock(dim, num_heads, d_ff, "pre") for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def extra_repr(self) -> str:
        return f"image_size={self.image_size}, patch={self.patch}, channels={self.channels}"

    def forward(self, images: torch.Tensor, need_weights: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Classify ``images``; see the class docstring.

        Shape: images ``(b, H, W)`` or ``(b, c, H, W)`` -> logits ``(b, classes)``, weights
            ``(layers, b, h, 1 + n, 1 + n)`` or None.
        """
        fn = "TinyViT.forward"
        check_bool(fn, "need_weights", need_weights)
        images = _check_images(fn, images)  # (b, c, H, W)
        expected = (self.channels, self.image_size, self.image_size)
        if tuple(images.shape[1:]) != expected:
            fail(fn, f"images must be {self.channels} x {self.image_size} x {self.image_size} (c, H, W), got shape "
                     f"{tuple(images.shape)}; resize the images or build the model with their sizes")
        x = self.patch_embedding(patchify(images, self.patch))  # (b, n, e)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.positions  # (b, 1 + n, e)
        weights = []
        for layer in self.layers:
            x, w = layer(x, need_weights=need_weights)  # (b, 1 + n, e), (b, h, 1 + n, 1 + n) or None
            weights.append(w)
        logits = self.head(self.final_norm(x[:, 0]))  # (b, classes): from the class token
        return logits, (torch.stack(weights) if need_weights else None)  # (layers, b, h, 1 + n, 1 + n)


class TinyCNN(nn.Module):
    """A small CNN: two 3 x 3 convolutions (zero padding 1), each followed by ReLU and 2 x 2 max pooling, then one
    linear layer. With the defaults (8 x 8 grey images, widths 8 and 24) it has 2,802 parameters, about as many as
    the default :class:`TinyViT`. ``forward(images)`` returns ``(logits, None)``, the ViT's call.

    Shape: images ``(b, H, W)`` or ``(b, c, H, W)`` with ``H = W = image_size`` (a multiple of 4)
        -> logits ``(b, classes)``.
    """

    def __init__(self, *, image_size: int = 8, channels: int = 1, widths: tuple[int, int] = (8, 24),
                 classes: int = 10) -> None:
        super().__init__()
        fn = "TinyCNN"
        check_positive_ints(fn, image_size=image_size, channels=channels, classes=classes)
        if not isinstance(widths, tuple) or len(widths) != 2:
            fail(fn, f"widths must be a tuple of two channel counts, got {widths!r}; pass e.g. widths=(8, 24)",
                 TypeError)
        check_positive_ints(fn, first_width=widths[0], second_width=widths[1])
        if image_size % 4:
            fail(fn, f"image_size must be a multiple of 4 (two 2 x 2 poolings), got image_size={image_size}; pad "
                 f"the images to a multiple of 4")
        self.image_size, self.channels = image_size, channels
        self.features = nn.Sequential(
            nn.Conv2d(channels, widths[0], 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(widths[0], widths[1], 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(widths[1] * (image_size // 4) ** 2, classes)

    def forward(self, images: torch.Tensor, need_weights: bool = False) -> tuple[torch.Tensor, None]:
        """Classify ``images``; a CNN has no attention weights, so ``need_weights=True`` is refused.

        Shape: images ``(b, H, W)`` or ``(b, c, H, W)`` -> logits ``(b, classes)``.
        """
        fn = "TinyCNN.forward"
        if check_bool(fn, "need_weights", need_weights):
            fail(fn, "need_weights must be False for a CNN (it has no attention weights), got need_weights=True; "
                     "call it with need_weights=False")
        images = _check_images(fn, images)  # (b, c, H, W)
        expected = (self.channels, self.image_size, self.image_size)
        if tuple(images.shape[1:]) != expected:
            fail(fn, f"images must be {self.channels} x {self.image_size} x {self.image_size} (c, H, W), got shape "
                     f"{tuple(images.shape)}; resize the images or build the model with their sizes")
        return self.head(self.features(images).flatten(1)), None  # (b, classes)
