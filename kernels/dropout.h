/* dropout.h — dropout masks regenerated from a seed instead of stored.
 *
 * Every mask bit is a pure function of (seed, stream_id, index), so the forward pass, the backward
 * pass and the plain-C references all compute the same bit for an element without any memory
 * traffic. stream_id separates the independent masks of one step (e.g. layer * 4 + site); index is
 * the element's flat index in its tensor. dropout_hash (splitmix64) makes one 64-bit key per mask
 * (or per attention row); cheap 32-bit multiply-fold hashes of that key then give 16 random bits
 * per element, four elements per call, so a kernel pays a few integer instructions per element. */
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

/* The low and high words of x c, folded. On the device in 32-bit instructions (a multiply and
 * __umulhi): written as a 64-bit product, the compiler kept the surrounding arithmetic in 64 bits,
 * twice the instructions in kernels whose dropout is bound by instruction issue. The same value. */
UNPAD_HD uint32_t dropout_mum32(uint32_t x, uint32_t c)
{
#if defined(__CUDA_ARCH__)
    return (x * c) ^ __umulhi(x, c);
#else
    const uint64_t y = (uint64_t)x * c;
    return (uint32_t)y ^ (uint32_t)(y >> 32);
#endif
}

/* dropout_bits4's 64 bits as two 32-bit words: lo holds the fields of elements 0 and 1 (bits 0-15,
 * 16-31), hi those of 2 and 3. Kernels take the words; the 64-bit value is their concatenation. */
typedef struct {
    uint32_t lo, hi;
} dropout_words;

UNPAD_HD dropout_words dropout_bits4_words(uint64_t key, uint64_t g)
{
    const uint32_t x = (uint32_t)g * 0x9E3779B9u + (uint32_t)key;
    const uint32_t y = dropout_mum32(x, 0x85EBCA6Bu) ^ (uint32_t)(key >> 32) ^ (uint32_t)(g >> 32);
    const dropout_words w = {dropout_mum32(y, 0xC2B2AE35u), dropout_mum32(y ^ 0x6A09E667u, 0x27D4EB2Fu)};
    return w;
}

/* ---- element dropout (LayerNorm, embedding) -------------------------------------------------
 * For element i of a tensor whose mask key is key = dropout_hash(seed, stream_id, 0):
 *   bits = dropout_bits4(key, i / 4)        16 bits for each of elements 4 (i / 4) .. + 3
 *   keep = ((bits >> 16 * (i % 4)) & 0xffff) >= dropout_threshold(p)
 * The keep probability is 1 - floor(65536 p) / 65536 (0.900009 at p = 0.1); the kept values are
 * scaled by 1 / (1 - p). */
UNPAD_HD uint64_t dropout_bits4(uint64_t key, uint64_t g)
{
    const dropout_words w = dropout_bits4_words(key, g);
    return (uint64_t)w.hi << 32 | w.lo;
}

UNPAD_HD uint32_t dropout_threshold(float p) { return (uint32_t)(p * 65536.0f); }

UNPAD_HD uint64_t dropout_key(uint64_t seed, uint64_t stream_id) { return dropout_hash(seed, stream_id, 0); }

/* 1 if element `index` of the mask (seed, stream_id) is kept with drop probability p (0 <= p < 1). */
UNPAD_HD int dropout_keep(uint64_t seed, uint64_t stream_id, uint64_t index, float p)
{
    const uint64_t bits = dropout_bits4(dropout_key(seed, stream_id), index >> 2);
    return ((bits >> (16 * (index & 3))) & 0xffffu) >= dropout_threshold(p);
}

/* v[j] = keep(e + j) ? v[j] * scale : 0 for j < 8, with e a multiple of 4 and thr =
 * dropout_threshold(p): two hashes for the eight. */
UNPAD_HD void dropout_apply8(float *v, uint64_t key, uint32_t thr, float scale, uint64_t e)
{
    const dropout_words b[2] = {dropout_bits4_words(key, e >> 2), dropout_bits4_words(key, (e >> 2) + 1)};
    for (int j = 0; j < 8; j++) {
        const uint32_t w = j & 2 ? b[j >> 2].hi : b[j >> 2].lo;
        v[j] = ((w >> (16 * (j & 1))) & 0xffffu) >= thr ? v[j] * scale : 0.0f;
    }
}

/* ---- attention dropout (fmha.h) -------------------------------------------------------------
 * The mask of the attention probabilities comes four keys per hash: for query row
 * row = t * NH + h (token t of the batch, head h) and key j of its sequence,
 *   rk    = dropout_hash(seed, stream_id, row)           once per query row
 *   quad  = fmha_mask_quad_of(j) = 4 (j / 16) + (j / 2) % 4
 *           (keys 16 a + 2 c + {0, 1, 8, 9} share one hash)
 *   bits  = fmha_mask_quad(rk, quad)                     two 32-bit words, lo and hi
 *   field = fmha_mask_field_of(j) = 2 ((j / 8) % 2) + j % 2      (16-bit field: lo, lo >> 16,
 *           hi, hi >> 16)
 *   keep  = (field & 0x7fff) >= fmha_mask_threshold(p)
 * The grouping follows the tiles' register layouts: a thread of the forward holds keys 2c, 2c + 1
 * and 2c + 8, 2c + 9 of each of its query rows, and in the backward lanes l and l ^ 4 together
 * hold the four keys of a quad for two neighbouring queries, so one hash (dropout_bits4: three
 * 32 x 32 -> 64-bit multiplies, each folded high ^ low) serves four elements. 15 bits of each field are compared
 * so that a kernel can test two fields of a word at once with one add (the sign bit of each half
 * of (word & 0x7fff7fff) + (0x8000 - thr) (1 + 2^16) is the keep bit). The keep probability is
 * 1 - floor(32768 p) / 32768 (0.900024 at p = 0.1); the kept values are scaled by 1 / (1 - p). */
typedef dropout_words fmha_quad_bits;

/* The same 64 bits as the element masks' dropout_bits4, with the row key as the key. */
UNPAD_HD fmha_quad_bits fmha_mask_quad(uint64_t rk, uint32_t quad) { return dropout_bits4_words(rk, quad); }

UNPAD_HD uint32_t fmha_mask_quad_of(int j) { return (uint32_t)(4 * (j >> 4) + ((j >> 1) & 3)); }

UNPAD_HD int fmha_mask_field_of(int j) { return 2 * ((j >> 3) & 1) + (j & 1); }

UNPAD_HD uint32_t fmha_mask_threshold(float p) { return (uint32_t)(p * 32768.0f); }

/* 1 if the attention mask keeps (query row `row` = t * NH + h, key j); thr = fmha_mask_threshold(p). */
UNPAD_HD int fmha_mask_keep(uint64_t seed, uint64_t stream_id, uint64_t row, int j, uint32_t thr)
{
    const fmha_quad_bits b = fmha_mask_quad(dropout_hash(seed, stream_id, row), fmha_mask_quad_of(j));
    const int f = fmha_mask_field_of(j);
    const uint32_t w = f < 2 ? b.lo : b.hi;
    return ((w >> (16 * (f & 1))) & 0x7fffu) >= thr;
}

#endif
