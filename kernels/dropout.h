/* dropout.h — dropout masks regenerated from a seed instead of stored.
 *
 * keep(seed, stream_id, index) is a pure function (a splitmix64-style hash), so the forward pass,
 * the backward pass and the plain-C references all compute the same mask bit for an element
 * without any memory traffic. stream_id separates the independent masks of one step (e.g.
 * layer * 4 + site); index is the element's flat index in its tensor. The attention dropout of
 * the FMHA draws two keys per hash instead (the second half of this file). */
#ifndef UNPAD_DROPOUT_H
#define UNPAD_DROPOUT_H

#include <stdint.h>

#if defined(__CUDACC__)
#define UNPAD_HD __host__ __device__ __forceinline__
#else
#define UNPAD_HD static inline
#endif

UNPAD_HD uint64_t dropout_hash(uint64_t seed, uint64_t stream_id, uint64_t index)
{
    uint64_t z = seed ^ (stream_id * 0x9E3779B97F4A7C15ull) ^ (index * 0xD1B54A32D192ED03ull);
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* 1 if the element is kept with drop probability p (0 <= p < 1): compares 24 random bits. */
UNPAD_HD int dropout_keep(uint64_t seed, uint64_t stream_id, uint64_t index, float p)
{
    uint32_t r = (uint32_t)(dropout_hash(seed, stream_id, index) >> 40); /* 24 bits */
    return (float)r >= p * 16777216.0f;
}

/* ---- attention dropout (fmha.h) -------------------------------------------------------------
 * The mask of the attention probabilities comes two keys per hash: for query row
 * row = t * NH + h (token t of the batch, head h) and key j of its sequence,
 *   rk   = dropout_hash(seed, stream_id, row)            once per query row
 *   bits = fmha_mask_pair(rk, j / 2)                      32 bits for keys j & ~1 and j | 1
 *   keep = ((bits >> 16 * (j % 2)) & 0xffff) >= fmha_mask_threshold(p)
 * so a kernel holding two neighbouring keys of a row pays one cheap hash of a few integer
 * instructions (two 32 x 32 -> 64-bit multiplies, each folded high ^ low) for both. The keep
 * probability is 1 - floor(65536 p) / 65536 (0.900009 at p = 0.1). */
UNPAD_HD uint32_t dropout_mum32(uint32_t x, uint32_t c)
{
    const uint64_t y = (uint64_t)x * c;
    return (uint32_t)y ^ (uint32_t)(y >> 32);
}

UNPAD_HD uint32_t fmha_mask_pair(uint64_t rk, uint32_t pair)
{
    const uint32_t x = (uint32_t)rk + pair * 0x9E3779B9u;
    return dropout_mum32(dropout_mum32(x, 0x85EBCA6Bu) ^ (uint32_t)(rk >> 32), 0xC2B2AE35u);
}

UNPAD_HD uint32_t fmha_mask_threshold(float p) { return (uint32_t)(p * 65536.0f); }

/* 1 if the attention mask keeps (query row `row` = t * NH + h, key j); thr = fmha_mask_threshold(p). */
UNPAD_HD int fmha_mask_keep(uint64_t seed, uint64_t stream_id, uint64_t row, int j, uint32_t thr)
{
    const uint32_t bits = fmha_mask_pair(dropout_hash(seed, stream_id, row), (uint32_t)j >> 1);
    return ((bits >> (16 * (j & 1))) & 0xffffu) >= thr;
}

#endif
