/* check_memory.c — the trainer's device memory: every term by hand, the totals the trainer's own
 * allocation code gives, what unpad-train printed on the H200, and the fit against the spec. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "memory.h"
#include "testutil.h"

static model_cfg L, B;
static hw_spec H200, A100;

static void setup(void)
{
    char p[512];
    unpad_err e = {0};
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-large.cfg"), &L, &e), 0);
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-base.cfg"), &B, &e), 0);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &H200, &e), 0);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/a100-sxm4-40g.cfg"), &A100, &e), 0);
}

#define GIB 1073741824.0

START_TEST(test_terms)
{
    memory_setup s;
    memory_use u;
    memory_trainer_setup(&L, 56, 56L * 512, 56, 0, &s);
    ck_assert_int_eq(s.tokens, 56 * 512);
    ck_assert_int_eq(s.preds, 56 * 76);
    memory_predict(&L, &H200, &s, &u);
    /* the table holds every parameter, each tensor rounded up to 64 elements, vocabulary padded */
    long np = model_param_count(&L), extra = 30528 - 30522;
    ck_assert(u.params >= np + extra * (1024 + 1) && u.params <= np + extra * 1025 + 64 * 400);
    /* fp32 master, bf16 copy, fp32 gradients, LAMB m and v */
    ck_assert_double_eq_tol(u.master_gib, u.params * 4 / GIB, 1e-12);
    ck_assert_double_eq_tol(u.work_gib, u.params * 2 / GIB, 1e-12);
    ck_assert_double_eq_tol(u.grad_gib, u.params * 4 / GIB, 1e-12);
    ck_assert_double_eq_tol(u.optim_gib, u.params * 8 / GIB, 1e-12);
    /* activations: per token and layer (QKV, context, 3 x T x H of LayerNorm inputs and block
     * output, FFN pre-activation and output) in bf16, plus log-sum-exp and 4 statistics in fp32 */
    double T = 56 * 512, per_layer = T * (2 * (3 * 1024 + 1024 + 3 * 1024 + 2 * 4096) + 16 * 4 + 4 * 4);
    ck_assert(u.acts_gib * GIB > 24 * per_layer);
    ck_assert(u.acts_gib * GIB < 24 * per_layer * 1.2);
    ck_assert_double_eq_tol(u.context_gib, H200.context_gib, 1e-12);
    ck_assert_double_eq_tol(u.total_gib, u.trainer_gib + u.workspace_gib + u.context_gib, 1e-12);
    /* NCCL adds its buffers; the fp32 build doubles the working copy and the bf16 activations */
    memory_use n, f;
    s.nccl = 1;
    memory_predict(&L, &H200, &s, &n);
    ck_assert_double_eq_tol(n.total_gib - u.total_gib, H200.nccl_gib, 1e-12);
    s.nccl = 0;
    s.fp32 = 1;
    memory_predict(&L, &H200, &s, &f);
    ck_assert_double_eq_tol(f.work_gib, 2 * u.work_gib, 1e-12);
    ck_assert(f.acts_gib > 1.8 * u.acts_gib);
    /* an arena for fewer tokens takes less */
    memory_setup half = {.tokens = 56 * 256, .seqs = 56, .preds = 56 * 38};
    memory_use h;
    memory_predict(&L, &H200, &half, &h);
    ck_assert(h.acts_gib < 0.55 * u.acts_gib);
}
END_TEST

START_TEST(test_against_the_trainer)
{
    /* bert.c's layout_acts and parameter table, compiled on the host with the kernels' scratch
     * sizes, give 12.0177, 27.8207 and 43.6235 GiB for bert-large at 16, 56 and 96 x 512 with the
     * FMHA's dQ accumulator rows of 72 floats; rows of 64 take T x 16 heads x 32 bytes less. */
    static const struct { int batch; double code, logged, in_use; } c[] = {
        {16, 12.0177 - 8192 * 512.0 / (1 << 30), 12.01, 12.64},
        {56, 27.8207 - 28672 * 512.0 / (1 << 30), 27.86, 28.48},
        {96, 43.6235 - 49152 * 512.0 / (1 << 30), 43.73, 44.35}};
    for (int i = 0; i < 3; i++) {
        memory_setup s;
        memory_use u;
        memory_trainer_setup(&L, c[i].batch, c[i].batch * 512L, c[i].batch, 0, &s);
        memory_predict(&L, &H200, &s, &u);
        ck_assert_msg(fabs(u.trainer_gib - c[i].code) < 0.0005, "batch %d: %.4f", c[i].batch,
                      u.trainer_gib);
        /* traces/logs (build of 2026-12-03 07:34, whose embedding backward kept T x H fp32 of
         * scratch: up to 0.13 GiB more) and cudaMemGetInfo's "in use" within 1% */
        ck_assert(fabs(u.trainer_gib - c[i].logged) / c[i].logged < 0.005);
        ck_assert(fabs(u.total_gib - c[i].in_use) / c[i].in_use < 0.01);
    }
    memory_setup s;
    memory_use u;
    memory_trainer_setup(&B, 56, 56L * 512, 56, 0, &s);
    memory_predict(&B, &H200, &s, &u);
    ck_assert(fabs(u.total_gib - 11.31) / 11.31 < 0.01); /* traces/logs/calib-bert-base-b56.log */
}
END_TEST

START_TEST(test_fp8)
{
    /* --fp8 on, bert-large: 2 x 24 x (4H^2 + 2FH) bytes of E4M3 weights, T x max(3H, F) of operand,
     * 105 bytes of scaling state per scaled tensor (12 a layer), 4 cast items and 16 bytes a layer;
     * FFN1's output h in one byte an element (L x T x F bytes less), or in bf16 with
     * UNPAD_FP8_GELU_OUT=0 (MEMORY_FP8_H16). Measured in use (traces/logs/fp8-trainer): h in bf16 on
     * the H200, 29.04 GiB at 56 x 512, 44.91 at 96 x 512, 13.42 at 64 x 128; h in E4M3 on an H100
     * (the spec's context carried over from the H200's), 26.42 at 56 x 512, 40.41 at 96 x 512, 12.67
     * at 64 x 128 */
    static const struct { int batch, len; double h16, e4m3; } c[] = {
        {56, 512, 29.04, 26.42}, {96, 512, 44.91, 40.41}, {64, 128, 13.42, 12.67}};
    for (int i = 0; i < 3; i++) {
        memory_setup s;
        memory_use off, h16, on;
        memory_trainer_setup(&L, c[i].batch, (long)c[i].batch * c[i].len, c[i].batch, 0, &s);
        memory_predict(&L, &H200, &s, &off);
        ck_assert(off.fp8_gib == 0);
        s.fp8 = MEMORY_FP8_H16;
        memory_predict(&L, &H200, &s, &h16);
        double T = (double)c[i].batch * c[i].len, bytes = 2 * 24 * (4 * 1024.0 * 1024 + 2 * 4096.0 * 1024) +
                                                         T * 4096 + 24 * (12 * 105 + 4 * 56 + 16);
        ck_assert_double_eq_tol(h16.fp8_gib * GIB, bytes, 1e-3);
        ck_assert(h16.acts_gib == off.acts_gib);
        ck_assert_double_eq_tol(h16.total_gib - off.total_gib, h16.fp8_gib, 1e-12);
        ck_assert_msg(fabs(h16.total_gib - c[i].h16) / c[i].h16 < 0.01, "%d x %d: %.2f", c[i].batch, c[i].len,
                      h16.total_gib);
        s.fp8 = MEMORY_FP8_ON;
        memory_predict(&L, &H200, &s, &on);
        ck_assert_double_eq_tol((h16.acts_gib - on.acts_gib) * GIB, 24 * T * 4096, 1e-3);
        ck_assert(on.fp8_gib == h16.fp8_gib);
        ck_assert_msg(fabs(on.total_gib - c[i].e4m3) / c[i].e4m3 < 0.01, "%d x %d: %.2f", c[i].batch, c[i].len,
                      on.total_gib);
    }
}
END_TEST

START_TEST(test_fits)
{
    memory_setup s;
    memory_use u;
    char why[256];
    memory_trainer_setup(&L, 56, 56L * 512, 56, 1, &s);
    memory_predict(&L, &A100, &s, &u);
    ck_assert_int_eq(memory_fits(&u, &A100, why, sizeof why), 1);
    memory_trainer_setup(&L, 96, 96L * 512, 96, 1, &s);
    memory_predict(&L, &A100, &s, &u);
    ck_assert_int_eq(memory_fits(&u, &A100, why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(why, "of 39.6 GiB (a100-sxm4-40g)"));
    memory_predict(&L, &H200, &s, &u);
    ck_assert_int_eq(memory_fits(&u, &H200, NULL, 0), 1);
}
END_TEST

START_TEST(test_arena_tokens)
{
    /* n mean + 5 sqrt(n) sd, up to a multiple of 256, never above n x max_len */
    ck_assert_int_eq(memory_arena_tokens(56, 512, 230, 150), 18688); /* 12,880 + 5,612.5 -> 18,688 */
    ck_assert_int_eq(memory_arena_tokens(16, 128, 120, 40), 2048);   /* 2,720 > 16 x 128 */
    ck_assert_int_eq(memory_arena_tokens(4, 512, 512, 0), 2048);     /* every length the longest */
    ck_assert_int_eq(memory_arena_tokens(1, 512, 256, 0), 256);
    /* from a distribution: half 8, half 24 -> mean 16, sd 8; clamped to [10, 20] -> mean 15, sd 5 */
    unpad_dist d = {.max_len = 24, .total = 2};
    double count[25] = {0};
    count[8] = count[24] = 1;
    d.count = count;
    ck_assert_int_eq(memory_dist_tokens(100, 1, 512, &d), 2048);  /* 1,600 + 400 */
    ck_assert_int_eq(memory_dist_tokens(100, 10, 20, &d), 1792);  /* 1,500 + 250 -> 1,792 */
    ck_assert_int_eq(memory_dist_tokens(100, 1, 16, &d), 1536);   /* 8 and 16: 1,200 + 200 -> 1,536 */
    ck_assert_int_eq(memory_dist_tokens(4, 1, 16, &d), 64);       /* 88 -> 256, above 4 x 16 */
    /* the longest is the distribution's when it is shorter than hi: 4 x 24, not 4 x 512 */
    ck_assert_int_eq(memory_dist_tokens(4, 1, 512, &d), 96);      /* 64 + 80 -> 256, above 4 x 24 */
}
END_TEST

Suite *memory_suite(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_terms);
    tcase_add_test(tc, test_against_the_trainer);
    tcase_add_test(tc, test_fp8);
    tcase_add_test(tc, test_fits);
    tcase_add_test(tc, test_arena_tokens);
    suite_add_tcase(s, tc);
    return s;
}
