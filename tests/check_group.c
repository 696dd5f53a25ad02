/* check_group.c — FMHA grouping: the dynamic programme equals brute force, plans cover the batch,
 * fixed boundaries, parsing of boundary lists. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cost.h"
#include "group.h"
#include "testutil.h"

static hw_spec HW;
static calib_coef CAL;
static const int HEADS = 16;

static void setup(void)
{
    char p[512];
    unpad_err e = {0};
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &HW, &e), UNPAD_OK);
    calib_default(&HW, &CAL);
}

static uint64_t lcg_state;
static unsigned lcg(void)
{
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(lcg_state >> 33);
}

/* Groups partition the batch: counts add up, ranges descend without overlap, streams in range,
 * and the total is max(work, longest chain). */
static void check_plan(const group_plan *p, const int *len, int n, int max_streams)
{
    int sum = 0, mx = 0, mn = 1 << 30;
    for (int i = 0; i < n; i++) {
        mx = len[i] > mx ? len[i] : mx;
        mn = len[i] < mn ? len[i] : mn;
    }
    ck_assert_int_ge(p->ngroups, 1);
    ck_assert_int_eq(p->hi[0], mx);
    ck_assert_int_eq(p->lo[p->ngroups - 1], mn);
    double chain[GROUP_MAX_STREAMS] = {0};
    for (int g = 0; g < p->ngroups; g++) {
        ck_assert_int_le(p->lo[g], p->hi[g]);
        if (g)
            ck_assert_int_lt(p->hi[g], p->lo[g - 1]);
        ck_assert_int_ge(p->stream[g], 0);
        ck_assert_int_lt(p->stream[g], max_streams);
        if (g)
            ck_assert_int_ge(p->stream[g], p->stream[g - 1]); /* contiguous ranges per stream */
        int c = 0;
        for (int i = 0; i < n; i++)
            c += len[i] >= p->lo[g] && len[i] <= p->hi[g];
        ck_assert_int_eq(c, p->count[g]);
        sum += c;
        chain[p->stream[g]] += p->us[g];
        ck_assert(p->end_us[g] >= p->start_us[g]);
        ck_assert(p->end_us[g] <= p->total_us * (1 + 1e-12));
    }
    ck_assert_int_eq(sum, n);
    double worst = 0;
    for (int s = 0; s < GROUP_MAX_STREAMS; s++)
        worst = chain[s] > worst ? chain[s] : worst;
    ck_assert_double_eq_tol(p->chain_us, worst, 1e-9 * worst);
    ck_assert_double_eq_tol(p->objective_us, fmax(worst, p->work_us), 1e-9 * p->objective_us);
    /* the simulation lets no stream end before its own kernels would alone, and no plan beats
     * the work spread over every slot by more than the tiles' quantisation */
    ck_assert(p->total_us >= worst * (1 - 1e-9));
}

START_TEST(test_dp_equals_brute_force)
{
    /* also under the FMHA's width and load terms: every group's tiles take the load of the whole
     * batch, so the DP's prefix simulations and brute force's groups time alike */
    calib_coef terms = CAL;
    terms.attn_narrow = -1.2;
    terms.attn_bwd_narrow = -1.3;
    terms.attn_load = 0.3;
    terms.attn_bwd_load = 0.4;
    lcg_state = 17;
    unpad_err e = {0};
    int len[40];
    for (int trial = 0; trial < 80; trial++) {
        const calib_coef *cal = trial < 60 ? &CAL : &terms;
        int heads = trial < 60 ? HEADS : 12;
        int n = 2 + (int)(lcg() % 39);
        int maxlen = trial % 2 ? 512 : 1024;
        for (int i = 0; i < n; i++)
            len[i] = 1 + (int)(lcg() % (unsigned)maxlen);
        group_opts o = {1 + (int)(lcg() % 4), 1 << (lcg() % 7), 4 + (int)(lcg() % 7)};
        group_plan dp, bf;
        ck_assert_int_eq(group_plan_dp(&HW, cal, heads, len, n, &o, &dp, &e), UNPAD_OK);
        ck_assert_int_eq(group_plan_brute(&HW, cal, heads, len, n, &o, &bf, &e), UNPAD_OK);
        ck_assert_msg(fabs(dp.objective_us - bf.objective_us) <= 1e-9 * bf.objective_us,
                      "trial %d (n %d, streams %d, gran %d, units %d): DP %.9g, brute force %.9g",
                      trial, n, o.max_streams, o.granularity, o.max_units, dp.objective_us,
                      bf.objective_us);
        check_plan(&dp, len, n, o.max_streams);
        check_plan(&bf, len, n, o.max_streams);
    }
}
END_TEST

/* The planner never does worse than what it can choose: one launch longest first, and the fixed
 * 128/256/384/512 buckets; its boundaries replayed as fixed bounds give the same time. */
START_TEST(test_dp_beats_alternatives)
{
    lcg_state = 3;
    unpad_err e = {0};
    int len[64];
    const int buckets[] = {128, 256, 384, 512};
    for (int trial = 0; trial < 12; trial++) {
        int n = 16 + (int)(lcg() % 48);
        for (int i = 0; i < n; i++)
            len[i] = lcg() % 4 == 0 ? 512 : 1 + (int)(lcg() % 512);
        group_opts o;
        group_opts_default(&o);
        o.max_units = GROUP_MAX;
        group_plan dp, bk, rep;
        ck_assert_int_eq(group_plan_dp(&HW, &CAL, HEADS, len, n, &o, &dp, &e), UNPAD_OK);
        check_plan(&dp, len, n, o.max_streams);
        int sorted[64];
        memcpy(sorted, len, sizeof(int) * (size_t)n);
        for (int i = 1; i < n; i++) /* longest first */
            for (int j = i; j > 0 && sorted[j] > sorted[j - 1]; j--) {
                int t = sorted[j];
                sorted[j] = sorted[j - 1];
                sorted[j - 1] = t;
            }
        double one = group_one_launch_us(&HW, &CAL, HEADS, sorted, n);
        ck_assert(dp.objective_us <= one * (1 + 1e-12));
        /* auto: no worse, simulated, than one launch or the DP's own plan */
        group_plan au;
        ck_assert_int_eq(group_plan_auto(&HW, &CAL, HEADS, len, n, &o, &au, &e), UNPAD_OK);
        check_plan(&au, len, n, o.max_streams);
        ck_assert(au.total_us <= one * (1 + 1e-12));
        ck_assert(au.total_us <= dp.total_us * (1 + 1e-12));
        for (int s = 1; s <= o.max_streams; s++) {
            ck_assert_int_eq(group_plan_bounds(&HW, &CAL, HEADS, len, n, buckets, 4, s, &bk, &e),
                             UNPAD_OK);
            check_plan(&bk, len, n, s);
            ck_assert(dp.objective_us <= bk.objective_us * (1 + 1e-12));
        }
        int b[GROUP_MAX];
        int nb = group_plan_upper_bounds(&dp, b);
        ck_assert_int_eq(nb, dp.ngroups - 1);
        ck_assert_int_eq(group_plan_bounds(&HW, &CAL, HEADS, len, n, b, nb, o.max_streams, &rep, &e),
                         UNPAD_OK);
        ck_assert_int_eq(rep.ngroups, dp.ngroups);
        ck_assert_double_eq_tol(rep.objective_us, dp.objective_us, 1e-9 * dp.objective_us);
        ck_assert_double_eq_tol(rep.work_us, dp.work_us, 1e-9 * dp.work_us); /* W is the batch's */
    }
}
END_TEST

/* Worked cases: one sequence is one group alone; on one stream the total is the sum of the groups;
 * a batch with a single length cannot be split. */
START_TEST(test_small_cases)
{
    unpad_err e = {0};
    group_opts o = {1, 1, 16};
    group_plan p;
    int one[] = {300};
    ck_assert_int_eq(group_plan_dp(&HW, &CAL, HEADS, one, 1, &o, &p, &e), UNPAD_OK);
    double alone = cost_fmha_us(&HW, &CAL, HEADS, one, 1, 0) + cost_fmha_us(&HW, &CAL, HEADS, one, 1, 1) +
                   cost_fmha_passes_us(&HW, &CAL, HEADS, 300, 1) + 2 * CAL.launch_us;
    ck_assert(cost_fmha_passes_us(&HW, &CAL, HEADS, 300, 1) > 0);
    ck_assert(cost_fmha_passes_us(&HW, &CAL, HEADS, 300, 0) == 0);
    ck_assert_int_eq(p.ngroups, 1);
    ck_assert_double_eq_tol(p.total_us, alone, 1e-9);
    ck_assert_double_eq_tol(group_one_launch_us(&HW, &CAL, HEADS, one, 1), alone, 1e-9);
    int same[] = {128, 128, 128, 128, 128};
    o.max_streams = 4;
    ck_assert_int_eq(group_plan_dp(&HW, &CAL, HEADS, same, 5, &o, &p, &e), UNPAD_OK);
    ck_assert_int_eq(p.ngroups, 1);
    ck_assert_int_eq(p.count[0], 5);
    int mix[] = {512, 512, 40, 40, 40, 300};
    o.max_streams = 1;
    ck_assert_int_eq(group_plan_dp(&HW, &CAL, HEADS, mix, 6, &o, &p, &e), UNPAD_OK);
    double sum = 0;
    for (int g = 0; g < p.ngroups; g++)
        sum += p.us[g];
    ck_assert_double_eq_tol(p.total_us, sum, 1e-9 * sum);
    ck_assert_int_eq(p.streams, 1);
    /* Granularity 512 puts every length <= 512 in one bin: no cut is possible. */
    o = (group_opts){4, 512, 16};
    ck_assert_int_eq(group_plan_dp(&HW, &CAL, HEADS, mix, 6, &o, &p, &e), UNPAD_OK);
    ck_assert_int_eq(p.ngroups, 1);
}
END_TEST

/* The shared-slot simulation of grouped launches: one group is the single-launch simulation; groups
 * on one stream run one after another; on two streams they overlap, never beating either alone
 * nor the serial sum; an empty group takes no time. */
START_TEST(test_streams_simulation)
{
    int a[20], b[30];
    for (int i = 0; i < 20; i++)
        a[i] = 512 - 7 * i;
    for (int i = 0; i < 30; i++)
        b[i] = 200 - 5 * i;
    for (int dir = 0; dir < 2; dir++) {
        double ta = cost_fmha_us(&HW, &CAL, HEADS, a, 20, dir), tb = cost_fmha_us(&HW, &CAL, HEADS, b, 30, dir);
        const int *l1[1] = {a};
        int n1[1] = {20}, s0[3] = {0, 0, 0}, s01[3] = {0, 1, 1};
        ck_assert(cost_fmha_streams_us(&HW, &CAL, HEADS, l1, n1, s0, 1, dir, NULL) == ta);
        const int *l2[3] = {a, b, b};
        int n2[3] = {20, 30, 0};
        double end[3];
        double serial = cost_fmha_streams_us(&HW, &CAL, HEADS, l2, n2, s0, 3, dir, end);
        ck_assert_double_eq_tol(serial, ta + tb, 1e-9 * serial);
        ck_assert_double_eq_tol(end[0], ta, 1e-9 * ta);
        double both = cost_fmha_streams_us(&HW, &CAL, HEADS, l2, n2, s01, 3, dir, end);
        ck_assert(both < serial);
        ck_assert(both >= ta && both >= tb);
        ck_assert(end[1] > 0 && end[2] == 0);
    }
}
END_TEST

START_TEST(test_bounds_parse)
{
    int b[GROUP_MAX], nb;
    unpad_err e = {0};
    char buf[128];
    ck_assert_int_eq(group_bounds_parse("auto", b, &nb, &e), UNPAD_OK);
    ck_assert_int_eq(nb, -1);
    ck_assert_int_eq(group_bounds_parse("none", b, &nb, &e), UNPAD_OK);
    ck_assert_int_eq(nb, 0);
    ck_assert_int_eq(group_bounds_parse("128, 256,384", b, &nb, &e), UNPAD_OK);
    ck_assert_int_eq(nb, 3);
    ck_assert_int_eq(b[2], 384);
    group_bounds_format(b, nb, buf, sizeof buf);
    ck_assert_str_eq(buf, "128,256,384");
    group_bounds_format(b, -1, buf, sizeof buf);
    ck_assert_str_eq(buf, "auto");
    ck_assert_int_eq(group_bounds_parse("256,128", b, &nb, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "ascend"));
    ck_assert_int_eq(group_bounds_parse("128,x", b, &nb, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "'x'"));
    ck_assert_int_eq(group_bounds_parse("0", b, &nb, &e), UNPAD_EINVAL);
    ck_assert_int_eq(group_bounds_parse(",", b, &nb, &e), UNPAD_EINVAL);
    /* an empty item is refused, wherever it stands, naming the list */
    const char *empty[] = {"128,,384", ",128", "128,", ",", ""};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(group_bounds_parse(empty[i], b, &nb, &e), UNPAD_EINVAL);
        ck_assert_msg(strstr(e.msg, "empty"), "%s: %s", empty[i], e.msg);
    }
    ck_assert_int_eq(group_bounds_parse("128,,384", b, &nb, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "'128,,384'"));
    group_plan p;
    int len[] = {10, 20};
    int bad[] = {300, 200};
    ck_assert_int_eq(group_plan_bounds(&HW, &CAL, HEADS, len, 2, bad, 2, 2, &p, &e), UNPAD_EINVAL);
    group_opts o = {9, 1, 16};
    ck_assert_int_eq(group_plan_dp(&HW, &CAL, HEADS, len, 2, &o, &p, &e), UNPAD_EINVAL);
    o.max_streams = 2;
    ck_assert_int_eq(group_plan_dp(&HW, &CAL, HEADS, len, 0, &o, &p, &e), UNPAD_EINVAL);
    len[0] = 0;
    ck_assert_int_eq(group_plan_dp(&HW, &CAL, HEADS, len, 2, &o, &p, &e), UNPAD_EINVAL);
}
END_TEST

/* The trainer's view: a plan of a longest-first batch as contiguous sequence ranges. */
START_TEST(test_seq_ranges)
{
    lcg_state = 77;
    group_opts o;
    group_opts_default(&o);
    unpad_err e = {0};
    for (int trial = 0; trial < 40; trial++) {
        int n = 2 + (int)(lcg() % 120), len[128];
        for (int i = 0; i < n; i++)
            len[i] = 1 + (int)(lcg() % 512);
        for (int i = 1; i < n; i++) /* insertion sort, longest first */
            for (int j = i; j > 0 && len[j] > len[j - 1]; j--) {
                int t = len[j];
                len[j] = len[j - 1];
                len[j - 1] = t;
            }
        group_plan p;
        int bounds[3] = {128, 256, 384};
        if (trial % 2)
            ck_assert_int_eq(group_plan_dp(&HW, &CAL, HEADS, len, n, &o, &p, &e), UNPAD_OK);
        else
            ck_assert_int_eq(group_plan_bounds(&HW, &CAL, HEADS, len, n, bounds, 3, 2, &p, &e), UNPAD_OK);
        int b[GROUP_MAX], en[GROUP_MAX], mx[GROUP_MAX];
        ck_assert_int_eq(group_seq_ranges(&p, len, n, b, en, mx, &e), UNPAD_OK);
        int at = 0;
        for (int g = 0; g < p.ngroups; g++) {
            ck_assert_int_eq(b[g], at);
            ck_assert_int_gt(en[g], b[g]);
            ck_assert_int_eq(mx[g], len[b[g]]);
            for (int i = b[g]; i < en[g]; i++) {
                ck_assert_int_le(len[i], mx[g]);
                ck_assert_int_ge(len[i], p.lo[g]);
                ck_assert_int_le(len[i], p.hi[g]);
            }
            if (!(trial % 2)) /* fixed bounds: no sequence on the wrong side of a boundary */
                for (int k = 0; k < 3; k++)
                    ck_assert(len[b[g]] <= bounds[k] || len[en[g] - 1] > bounds[k]);
            at = en[g];
        }
        ck_assert_int_eq(at, n);
        /* the same plan on lengths out of order is refused with the reason */
        int t = len[0];
        len[0] = len[n - 1];
        len[n - 1] = t;
        if (len[0] != len[n - 1]) {
            ck_assert_int_eq(group_seq_ranges(&p, len, n, b, en, mx, &e), UNPAD_EINVAL);
            ck_assert_ptr_nonnull(strstr(e.msg, "longest first"));
        }
    }
}
END_TEST

Suite *group_suite(void)
{
    Suite *s = suite_create("group");
    TCase *tc = tcase_create("core");
    tcase_add_unchecked_fixture(tc, setup, NULL);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_dp_equals_brute_force);
    tcase_add_test(tc, test_dp_beats_alternatives);
    tcase_add_test(tc, test_small_cases);
    tcase_add_test(tc, test_streams_simulation);
    tcase_add_test(tc, test_bounds_parse);
    tcase_add_test(tc, test_seq_ranges);
    suite_add_tcase(s, tc);
    return s;
}
