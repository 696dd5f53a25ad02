/* dropout.h — dropout masks regenerated from a seed instead of stored.
 *
 * keep(seed, stream_id, index) is a pure function (a splitmix64-style hash), so the forward pass,
 * the backward pass and the plain-C references all compute the same mask bit for an element
 * without any memory traffic. stream_id separates the independent masks of one step (e.g.
 * layer * 4 + site); index is the element's flat index in its tensor. */
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

#endif
