/* check_net.c — collectives in one node and across nodes: the formulas by hand, the one-node case
 * as the cost model's ring, growth with the node count, and bad or missing network keys. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "cost.h"
#include "net.h"
#include "testutil.h"

static hw_spec HW;
static calib_coef C;

static void setup(void)
{
    char p[512];
    unpad_err e = {0};
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &HW, &e), 0);
    calib_default(&HW, &C);
    C.comm_eff = 0.9;
}

START_TEST(test_allreduce)
{
    double B = 4.0 * 336e6; /* fp32 gradients of BERT-Large */
    net_cost nc;
    net_allreduce(&HW, &C, B, 1, &nc);
    ck_assert_int_eq(nc.algo, NET_NONE);
    ck_assert_double_eq(nc.us, 0);
    /* one node: the flat ring, as cost_allreduce_us times ops_step's 2 (N-1)/N volume */
    net_allreduce(&HW, &C, B, 8, &nc);
    ck_assert_int_eq(nc.algo, NET_RING);
    double link = HW.link_bw_gbs * 1e3 * 0.9;
    ck_assert_double_eq_tol(nc.us, 2 * 7.0 / 8 * B / link + 3 * HW.link_lat_us, 1e-9 * nc.us);
    ck_assert_double_eq_tol(nc.us, cost_allreduce_us(&HW, &C, 2 * 7.0 / 8 * B, 8), 1e-9 * nc.us);
    /* 64 GPUs = 8 nodes: reduce-scatter + all-gather in the node, B/8 across the nodes */
    net_allreduce(&HW, &C, B, 64, &nc);
    ck_assert_int_eq(nc.algo, NET_HIER);
    ck_assert_int_eq(nc.nodes, 8);
    ck_assert_int_eq(nc.per_node, 8);
    double node = HW.node_bw_gbs * 1e3 * 0.9;
    double inter = 2 * 7.0 / 8 * (B / 8) / node + 2 * 3 * HW.node_lat_us;
    ck_assert_double_eq_tol(nc.inter_us, inter, 1e-9 * inter);
    ck_assert_double_eq_tol(nc.intra_us, 2 * 7.0 / 8 * B / link + 3 * HW.link_lat_us, 1e-6);
    ck_assert_double_eq_tol(nc.us, nc.intra_us + nc.inter_us, 1e-9);
    /* more nodes, more time: 8 < 64 < 512 < 4096 GPUs */
    double prev = 0;
    int gpus[] = {8, 64, 512, 4096};
    for (int i = 0; i < 4; i++) {
        net_allreduce(&HW, &C, B, gpus[i], &nc);
        ck_assert_msg(nc.us > prev, "%d GPUs: %g after %g", gpus[i], nc.us, prev);
        prev = nc.us;
    }
    char d[256];
    ck_assert_ptr_nonnull(strstr(net_algo_describe(&nc, d, sizeof d), "512 nodes x 8 GPUs"));
    /* a part of a node: 12 GPUs are 2 nodes (8 + 4), the ring within them over 8 */
    net_allreduce(&HW, &C, B, 12, &nc);
    ck_assert_int_eq(nc.nodes, 2);
}
END_TEST

START_TEST(test_exchange)
{
    double b = 1e6;
    net_cost nc;
    net_exchange(&HW, &C, b, 8, &nc);
    double link = HW.link_bw_gbs * 1e3 * 0.9;
    ck_assert_double_eq_tol(nc.us, 7.0 / 8 * b / link + HW.link_lat_us, 1e-9);
    net_exchange(&HW, &C, b, 64, &nc);
    double node = HW.node_bw_gbs * 1e3 * 0.9;
    double inter = 56.0 / 64 * b / node + HW.node_lat_us, intra = 7.0 / 64 * b / link + HW.link_lat_us;
    ck_assert_double_eq_tol(nc.us, inter > intra ? inter : intra, 1e-9);
}
END_TEST

START_TEST(test_bad_network_keys)
{
    char p[512], path[512];
    unpad_err e = {0};
    char *text;
    ck_assert_int_eq(unpad_read_file(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &text, NULL, &e), 0);
    /* a missing key names the file and the key */
    char *cut = strdup(text);
    char *line = strstr(cut, "node_bw_gbs");
    memset(line, ' ', strcspn(line, "\n"));
    tu_write_tmp(path, sizeof path, ".cfg", cut);
    hw_spec hw;
    ck_assert_int_eq(hw_load(path, &hw, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, "node_bw_gbs"), "%s", e.msg);
    unlink(path);
    /* a bad value names the file and the line */
    free(cut);
    cut = strdup(text);
    line = strstr(cut, "gpus_per_node = 8");
    line[16] = '0';
    tu_write_tmp(path, sizeof path, ".cfg", cut);
    ck_assert_int_eq(hw_load(path, &hw, &e), UNPAD_EINVAL);
    int lineno = 1;
    for (char *q = cut; q < line; q++)
        lineno += *q == '\n';
    char want[600];
    snprintf(want, sizeof want, "%s:%d", path, lineno);
    ck_assert_msg(strstr(e.msg, want) && strstr(e.msg, "gpus_per_node"), "%s", e.msg);
    unlink(path);
    free(cut);
    free(text);
}
END_TEST

Suite *net_suite(void)
{
    Suite *s = suite_create("net");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_allreduce);
    tcase_add_test(tc, test_exchange);
    tcase_add_test(tc, test_bad_network_keys);
    suite_add_tcase(s, tc);
    return s;
}
