/* sm90.cuh — the Hopper instructions the FMHA kernels use, as inline PTX (compiled for sm_90a):
 * mbarriers, bulk tensor copies (TMA) from a CUtensorMap, bulk reductions into global memory, and
 * warpgroup matrix multiply-accumulate (wgmma) with shared-memory matrix descriptors.
 *
 * Shared-memory tiles are rows of 64 bf16 (128 bytes) in the 128-byte swizzle that both the copy
 * engine (CU_TENSOR_MAP_SWIZZLE_128B) and wgmma understand: the 16-byte chunk c of row r sits at
 * chunk position c ^ (r % 8), and every tile starts at a 1024-byte boundary. One such tile of R
 * rows is the operand of a wgmma in two ways:
 *   K-major  (the rows are M or N, the 64 columns are K):   desc_kmajor(tile + 32 * k16 step)
 *   MN-major (the rows are K, the 64 columns are M or N):   desc_mnmajor(tile + 2048 * k16 step)
 * Accumulator fragments of m64nN (fp32): thread (warp w, lane l) of the warpgroup holds rows
 * 16 w + l / 4 and 16 w + l / 4 + 8, columns 8 i + 2 (l % 4) + {0, 1}; element 4 i + 2 hr + e is
 * (row 16 w + l / 4 + 8 hr, column 8 i + 2 (l % 4) + e), as in mma.sync's m16n8 C fragment. A
 * register A fragment of one k16 step is mma.sync's m16n8k16 A fragment of the warp's 16 rows. */
#ifndef UNPAD_SM90_CUH
#define UNPAD_SM90_CUH

#include <cuda.h> /* CUtensorMap (types only: no driver call is linked) */
#include <stdint.h>

namespace sm90 {

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* ---- mbarriers -------------------------------------------------------------------------------- */
__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

/* Makes initialised barriers visible to the copy engine; a __syncthreads() must follow. */
__device__ __forceinline__ void mbar_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* Ends the barrier's life before its shared memory is reused (by a later CTA on the SM). */
__device__ __forceinline__ void mbar_inval(uint64_t *bar)
{
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

/* One plain arrival (release: this thread's earlier shared-memory writes and reads are ordered
 * before the phase completes). */
__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

/* Named barrier `id` (1 .. 15; 0 is __syncthreads) among `count` threads (a multiple of 32). */
__device__ __forceinline__ void named_sync(int id, int count)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/* One arrival that also expects `bytes` more bytes from bulk copies completing on the barrier. */
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}

/* 1 once the barrier's phase with parity `parity` has completed (may wait a while in hardware). */
__device__ __forceinline__ uint32_t mbar_try_wait(uint64_t *bar, uint32_t parity)
{
    uint32_t done;
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n"
                 "}\n"
                 : "=r"(done)
                 : "r"(smem_u32(bar)), "r"(parity)
                 : "memory");
    return done;
}

__device__ __forceinline__ uint64_t globaltimer_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %globaltimer;\n" : "=l"(t));
    return t;
}

/* Waits until the barrier's phase with parity `parity` has completed. A copy that never lands
 * (a wrong tensor map, say) traps after 4 seconds instead of hanging the device. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    if (mbar_try_wait(bar, parity))
        return;
    const uint64_t t0 = globaltimer_ns();
    while (!mbar_try_wait(bar, parity))
        if (globaltimer_ns() - t0 > 4000000000ull)
            __trap();
}

/* ---- bulk copies ------------------------------------------------------------------------------ */
/* Box at coordinates (c0 innermost, c1) of the tensor map -> shared dst; completes on bar. */
__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_u32(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
                 : "memory");
}

/* dst[0 .. bytes / 4) += src[...] (fp32, bytes a multiple of 16, both 16-byte aligned). */
__device__ __forceinline__ void bulk_reduce_add_f32(float *dst, const float *src, uint32_t bytes)
{
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
                 "r"(smem_u32(src)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/* At most N of this thread's bulk groups may still be reading their shared-memory source. */
template <int N>
__device__ __forceinline__ void bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
/* All of this thread's bulk groups complete (their writes performed). */
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

/* Orders this thread's ordinary shared-memory writes before later reads by wgmma or bulk copies. */
__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* ---- wgmma ------------------------------------------------------------------------------------ */
/* Matrix descriptor of a 128-byte-swizzled operand (see the file comment): start address,
 * leading byte offset, stride byte offset (between 8-row groups: 1024), swizzle mode 1 (128 B). */
__device__ __forceinline__ uint64_t desc_encode(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
           ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}
/* K-major: rows are M (or N), 64 columns are K; the k16 step s starts 32 s bytes into the row. */
__device__ __forceinline__ uint64_t desc_kmajor(uint32_t addr) { return desc_encode(addr, 16, 1024); }
/* MN-major: rows are K, 64 columns are M (or N); the k16 step s starts 16 rows (2048 B) later. The
 * leading offset (between 64-column blocks) is unused at M or N = 64. */
__device__ __forceinline__ uint64_t desc_mnmajor(uint32_t addr) { return desc_encode(addr, 8192, 1024); }

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmma. */
template <int R>
__device__ __forceinline__ void wg_fence_regs(float (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

#define UNPAD_WG_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), \
                       "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define UNPAD_WG_O8(i) "=f"(d[i]), "=f"(d[i + 1]), "=f"(d[i + 2]), "=f"(d[i + 3]), "=f"(d[i + 4]), \
                       "=f"(d[i + 5]), "=f"(d[i + 6]), "=f"(d[i + 7])
#define UNPAD_WG_O32 UNPAD_WG_O8(0), UNPAD_WG_O8(8), UNPAD_WG_O8(16), UNPAD_WG_O8(24)
#define UNPAD_WG_O64 UNPAD_WG_O32, UNPAD_WG_O8(32), UNPAD_WG_O8(40), UNPAD_WG_O8(48), UNPAD_WG_O8(56)
#define UNPAD_WG_D32 UNPAD_WG_D8(0), UNPAD_WG_D8(8), UNPAD_WG_D8(16), UNPAD_WG_D8(24)
#define UNPAD_WG_D64 UNPAD_WG_D32, UNPAD_WG_D8(32), UNPAD_WG_D8(40), UNPAD_WG_D8(48), UNPAD_WG_D8(56)
#define UNPAD_WG_R16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define UNPAD_WG_R32                                                                              \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define UNPAD_WG_R64                                                                              \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
    "%56, %57, %58, %59, %60, %61, %62, %63}"

/* d (64 x 64 fp32) = A B (k = 0: d is only written) or d += A B (k > 0), A (64 x 16) and
 * B (16 x 64) bf16 in shared memory; TA / TB: 1 if that operand is MN-major. The first step takes
 * no input, so that the compiler never copies the old values into the accumulator registers while
 * other wgmma are in flight (ptxas would then serialize them). */
template <int TA, int TB>
__device__ __forceinline__ void mma_n64_ss(float (&d)[32], uint64_t da, uint64_t db, int k)
{
    if (k == 0)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " UNPAD_WG_R32
                     ", %32, %33, p, 1, 1, %34, %35;\n}\n"
                     : UNPAD_WG_O32
                     : "l"(da), "l"(db), "n"(TA), "n"(TB));
    else
        asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " UNPAD_WG_R32
                     ", %32, %33, 1, 1, 1, %34, %35;\n"
                     : UNPAD_WG_D32
                     : "l"(da), "l"(db), "n"(TA), "n"(TB));
}

/* The same with d (64 x 128 fp32). */
template <int TA, int TB>
__device__ __forceinline__ void mma_n128_ss(float (&d)[64], uint64_t da, uint64_t db, int k)
{
    if (k == 0)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " UNPAD_WG_R64
                     ", %64, %65, p, 1, 1, %66, %67;\n}\n"
                     : UNPAD_WG_O64
                     : "l"(da), "l"(db), "n"(TA), "n"(TB));
    else
        asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " UNPAD_WG_R64
                     ", %64, %65, 1, 1, 1, %66, %67;\n"
                     : UNPAD_WG_D64
                     : "l"(da), "l"(db), "n"(TA), "n"(TB));
}

/* d (64 x 32 fp32) = A B (k = 0) or d += A B, both operands in shared memory, as mma_n64_ss. */
template <int TA, int TB>
__device__ __forceinline__ void mma_n32_ss(float (&d)[16], uint64_t da, uint64_t db, int k)
{
    if (k == 0)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " UNPAD_WG_R16
                     ", %16, %17, p, 1, 1, %18, %19;\n}\n"
                     : UNPAD_WG_O8(0), UNPAD_WG_O8(8)
                     : "l"(da), "l"(db), "n"(TA), "n"(TB));
    else
        asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " UNPAD_WG_R16
                     ", %16, %17, 1, 1, 1, %18, %19;\n"
                     : UNPAD_WG_D8(0), UNPAD_WG_D8(8)
                     : "l"(da), "l"(db), "n"(TA), "n"(TB));
}

/* d (64 x 64 fp32) += A B, A (64 x 16 bf16) from registers (a fragment), B in shared memory. */
template <int TB>
__device__ __forceinline__ void mma_n64_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " UNPAD_WG_R32
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                 : UNPAD_WG_D32
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1), "n"(TB));
}

#undef UNPAD_WG_O8
#undef UNPAD_WG_O32
#undef UNPAD_WG_O64
#undef UNPAD_WG_D8
#undef UNPAD_WG_D32
#undef UNPAD_WG_D64
#undef UNPAD_WG_R16
#undef UNPAD_WG_R32
#undef UNPAD_WG_R64

} /* namespace sm90 */

#endif
