"""Independent MurmurHash3 x86_128 in Python (from the algorithm's description),
used to produce the vectors in tests/unit/test_plan_units.c, and the node-stats
key as ONNX Runtime forms it. Run: python3 tests/plan/murmur3_ref.py"""
M = 0xFFFFFFFF


def rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M


def fmix(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M
    h ^= h >> 16
    return h


def x86_128(data: bytes, seed: int):
    c1, c2, c3, c4 = 0x239B961B, 0xAB0E9789, 0x38B34AE5, 0xA1E38B93
    h1 = h2 = h3 = h4 = seed & M
    n = len(data) // 16
    for i in range(n):
        k1, k2, k3, k4 = (int.from_bytes(data[16 * i + 4 * j:16 * i + 4 * j + 4], "little") for j in range(4))
        k1 = (rotl((k1 * c1) & M, 15) * c2) & M
        h1 ^= k1
        h1 = (rotl(h1, 19) + h2) & M
        h1 = (h1 * 5 + 0x561CCD1B) & M
        k2 = (rotl((k2 * c2) & M, 16) * c3) & M
        h2 ^= k2
        h2 = (rotl(h2, 17) + h3) & M
        h2 = (h2 * 5 + 0x0BCAA747) & M
        k3 = (rotl((k3 * c3) & M, 17) * c4) & M
        h3 ^= k3
        h3 = (rotl(h3, 15) + h4) & M
        h3 = (h3 * 5 + 0x96CD1C35) & M
        k4 = (rotl((k4 * c4) & M, 18) * c1) & M
        h4 ^= k4
        h4 = (rotl(h4, 13) + h1) & M
        h4 = (h4 * 5 + 0x32AC3B17) & M
    tail = data[16 * n:]
    t = len(tail)
    k = [int.from_bytes(tail[4 * j:4 * j + 4], "little") for j in range(4)]
    if t > 12:
        h4 ^= (rotl((k[3] * c4) & M, 18) * c1) & M
    if t > 8:
        h3 ^= (rotl((k[2] * c3) & M, 17) * c4) & M
    if t > 4:
        h2 ^= (rotl((k[1] * c2) & M, 16) * c3) & M
    if t > 0:
        h1 ^= (rotl((k[0] * c1) & M, 15) * c2) & M
    ln = len(data) & M
    h1 ^= ln; h2 ^= ln; h3 ^= ln; h4 ^= ln
    h1 = (h1 + h2 + h3 + h4) & M
    h2 = (h2 + h1) & M; h3 = (h3 + h1) & M; h4 = (h4 + h1) & M
    h1, h2, h3, h4 = fmix(h1), fmix(h2), fmix(h3), fmix(h4)
    h1 = (h1 + h2 + h3 + h4) & M
    h2 = (h2 + h1) & M; h3 = (h3 + h1) & M; h4 = (h4 + h1) & M
    return h1, h2, h3, h4


def node_key(name, op_type, inputs, outputs):
    h = (0, 0, 0, 0)
    for s in list(inputs) + list(outputs):
        h = x86_128(s.encode(), h[0])
    return "%s_%d" % (name or op_type, h[0] | (h[1] << 32))


if __name__ == "__main__":
    for s, seed in [(b"", 0), (b"", 1), (b"a", 0), (b"abc", 0), (b"hello world", 42),
                    (b"0123456789abcdef", 0), (b"The quick brown fox jumps over the lazy dog", 0),
                    (bytes(range(256)) * 2, 0x9747B28C)]:
        h = x86_128(s, seed)
        print("{%d, %du, {0x%08xu, 0x%08xu, 0x%08xu, 0x%08xu}}," % (len(s), seed, *h))
    print(node_key("", "Add", ["x", "", "y"], ["z"]))
    print(node_key("/model/layers.0/attn/q_proj/MatMul", "MatMul", ["a", "w"], ["o"]))
