"""Blockwise int4 quantization in com.microsoft MatMulNBits layout: our own asymmetric
quantizer (quantize_int4) and onnxruntime's symmetric one (quantize_int4_sym_ort).

For y = x @ W with W of shape [K, N]: each output column n is cut along K into blocks of
`block` values (the last padded with zeros). Per block, asymmetric: the range
[min(v, 0), max(v, 0)] is mapped onto 0..15, scale = range / 15, zero point
zp = round(-min / scale); q = clamp(round(v / scale) + zp, 0, 15); dequant = (q - zp) * scale.
B is uint8 [N, k_blocks, block/2], two values per byte along K, the even k in the low
nibble. Scales are float32 [N * k_blocks]; zero points are packed two per byte along the
blocks of a row: [N * ceil(k_blocks / 2)], block b of row n in byte n*ceil(kb/2) + b/2,
low nibble for even b (both flattened to 1-D, as ORT's quantizer stores them)."""
from __future__ import annotations

import numpy as np


def quantize_int4(w_kn: np.ndarray, block: int = 32):
    """w_kn: float32 [K, N]. Returns (B uint8 [N, kb, block/2], scales f32 [N*kb],
    zero_points uint8 [N*ceil(kb/2)], dequantized f32 [K, N])."""
    if block < 16 or block & (block - 1):
        raise ValueError("block must be a power of two >= 16")
    k, n = w_kn.shape
    kb = (k + block - 1) // block
    wt = np.zeros((n, kb * block), dtype=np.float32)
    wt[:, :k] = w_kn.T
    blocks = wt.reshape(n, kb, block)
    vmin = np.minimum(blocks.min(axis=2), 0.0)
    vmax = np.maximum(blocks.max(axis=2), 0.0)
    scale = ((vmax - vmin) / 15.0).astype(np.float32)
    safe = np.where(scale == 0.0, np.float32(1.0), scale)
    zp = np.clip(np.round(-vmin / safe), 0, 15).astype(np.uint8)
    q = np.clip(np.round(blocks / safe[:, :, None]) + zp[:, :, None], 0, 15).astype(np.uint8)
    packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
    zp_cols = (kb + 1) // 2
    zp_pad = np.zeros((n, zp_cols * 2), dtype=np.uint8)
    zp_pad[:, :kb] = zp
    zp_packed = (zp_pad[:, 0::2] | (zp_pad[:, 1::2] << 4)).astype(np.uint8)
    deq = ((q.astype(np.float32) - zp[:, :, None]) * scale[:, :, None]).reshape(n, kb * block)[:, :k].T
    return packed, scale.reshape(-1), zp_packed.reshape(-1), np.ascontiguousarray(deq)


def dequantize_int4(b: np.ndarray, scales: np.ndarray, zp: np.ndarray, k: int, n: int, block: int):
    """Inverse of quantize_int4 (independent unpacking, for the self-test)."""
    kb = (k + block - 1) // block
    b = b.reshape(n, kb, block // 2)
    q = np.empty((n, kb, block), dtype=np.float32)
    q[:, :, 0::2] = b & 0x0F
    q[:, :, 1::2] = b >> 4
    zp = zp.reshape(n, (kb + 1) // 2)
    z = np.empty((n, ((kb + 1) // 2) * 2), dtype=np.float32)
    z[:, 0::2] = zp & 0x0F
    z[:, 1::2] = zp >> 4
    z = z[:, :kb]
    w = (q - z[:, :, None]) * scales.reshape(n, kb)[:, :, None]
    return w.reshape(n, kb * block)[:, :k].T


def quantize_int4_sym_ort(w_kn: np.ndarray, block: int = 32):
    """Symmetric int4 blocks as onnxruntime's MatMulNBitsQuantizer writes them by default
    (DefaultWeightOnlyQuantizer.qbits_block_quant, QOperator format, is_symmetric=True):
    ORT's own MLAS routine quantize_matmul_4bits, K padded with zeros to whole blocks.
    Its rule: per block, scale = v_m / -8 with v_m the value of largest magnitude (its
    sign kept), q = clamp(round(v / scale) + 8, 0, 15); no zero points (the default 8).
    w_kn: float32 [K, N]. Returns (B uint8 [N, kb, block/2], scales f32 [N, kb])."""
    from onnxruntime.capi._pybind_state import quantize_matmul_4bits

    k, n = w_kn.shape
    kb = (k + block - 1) // block
    w = np.zeros((kb * block, n), dtype=np.float32)
    w[:k] = w_kn
    packed = np.zeros((n, kb, block // 2), dtype=np.uint8)
    scales = np.zeros((n, kb), dtype=np.float32)
    zp = np.zeros((n, (kb + 1) // 2), dtype=np.uint8)  # written, unused when symmetric
    quantize_matmul_4bits(packed, w, scales, zp, block, n, k, True)  # rows = K unpadded, as ORT passes
    return packed, scales
