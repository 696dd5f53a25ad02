/* check_resolve.c — the inputs resolver: the project home (UNPAD_HOME, else the executable's
 * folder), the default files, where the calibration came from, and a plan with flags on top. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cost.h"
#include "fit.h"
#include "resolve.h"
#include "testutil.h"

/* The project (make test sets UNPAD_HOME to it); tests that change UNPAD_HOME put it back. */
static char home[1024];

static void setup(void)
{
    const char *h = getenv("UNPAD_HOME");
    snprintf(home, sizeof home, "%s", h && *h ? h : ".");
}

static void teardown(void) { setenv("UNPAD_HOME", home, 1); }

static const char *under_home(char *buf, size_t n, const char *rel)
{
    snprintf(buf, n, "%s/%s", home, rel);
    return buf;
}

START_TEST(test_home)
{
    char buf[RESOLVE_PATH_LEN];
    unpad_err e = {0};
    setenv("UNPAD_HOME", "/opt/unpad//", 1);
    ck_assert_int_eq(resolve_home(buf, sizeof buf, &e), UNPAD_OK);
    ck_assert_str_eq(buf, "/opt/unpad");
    ck_assert_int_eq(resolve_project_path("models/hw/h200-sxm.cfg", buf, sizeof buf, &e), UNPAD_OK);
    ck_assert_str_eq(buf, "/opt/unpad/models/hw/h200-sxm.cfg");
    char small[16];
    ck_assert_int_eq(resolve_project_path("models/hw/h200-sxm.cfg", small, sizeof small, &e),
                     UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "too long"));
    /* Without UNPAD_HOME: the folder above bin/; the test runner lives in build/.../tests, not in
     * a bin/ folder, so the home is the current folder and paths stay relative. */
    unsetenv("UNPAD_HOME");
    ck_assert_int_eq(resolve_home(buf, sizeof buf, &e), UNPAD_OK);
    ck_assert_str_eq(buf, "");
    ck_assert_int_eq(resolve_project_path("models/bert-large.cfg", buf, sizeof buf, &e), UNPAD_OK);
    ck_assert_str_eq(buf, "models/bert-large.cfg");
    setenv("UNPAD_HOME", "", 1); /* empty counts as unset */
    ck_assert_int_eq(resolve_home(buf, sizeof buf, &e), UNPAD_OK);
    ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(test_defaults)
{
    char p[RESOLVE_PATH_LEN];
    unpad_err e = {0};
    resolve_req rq = {.need_dist = 1};
    resolve_inputs in;
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_str_eq(in.model_path, under_home(p, sizeof p, "models/bert-large.cfg"));
    ck_assert_str_eq(in.hw_path, under_home(p, sizeof p, "models/hw/h200-sxm.cfg"));
    ck_assert_str_eq(in.dist_path, under_home(p, sizeof p, "models/dists/wiki512.csv"));
    ck_assert_str_eq(in.calib_path, under_home(p, sizeof p, "models/calib/h200-sxm.cfg"));
    ck_assert_str_eq(in.plan_path, "");
    ck_assert_str_eq(in.model.name, "bert-large");
    ck_assert_str_eq(in.hw.name, "h200-sxm");
    ck_assert_int_eq(in.calib_from, CALIB_FITTED);
    ck_assert_int_eq(in.dist.max_len, 512);
    /* no plan: loader order, equal counts, the calibration's per-sequence cost, one FMHA launch */
    ck_assert_int_eq(in.have_plan, 0);
    ck_assert_int_eq(in.plan.policy, BAL_NONE);
    ck_assert_int_eq(in.plan.count, BAL_EQUAL);
    ck_assert_int_eq(in.plan.weights_tokens, 0);
    ck_assert_int_eq(in.plan.fmha_nb, 0);
    ck_assert_int_eq(in.plan.streams, 0);
    seq_cost sc;
    ck_assert_int_eq(cost_seq_model(&in.model, &in.hw, &in.calib, &sc, &e), UNPAD_OK);
    ck_assert_double_eq(in.plan.cost.c0, sc.c0);
    ck_assert_double_eq(in.plan.cost.c1, sc.c1);
    ck_assert_double_eq(in.plan.cost.c2, sc.c2);
    resolve_inputs_free(&in);

    /* A given path stays as given; no dist unless asked; --no-calib; hardware without a file. */
    rq = (resolve_req){.model = under_home(p, sizeof p, "models/bert-base.cfg"), .no_calib = 1};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_str_eq(in.model_path, p);
    ck_assert_str_eq(in.model.name, "bert-base");
    ck_assert_ptr_null(in.dist.count);
    ck_assert_str_eq(in.dist_path, "");
    ck_assert_int_eq(in.calib_from, CALIB_DEFAULT);
    ck_assert_str_eq(in.calib_path, "");
    ck_assert_int_eq(in.calib.fitted, 0);
    resolve_inputs_free(&in);
    char hw[RESOLVE_PATH_LEN], *text;
    ck_assert_int_eq(unpad_read_file(under_home(hw, sizeof hw, "models/hw/a100-sxm4-40g.cfg"), &text, NULL, &e),
                     UNPAD_OK);
    char *name = strstr(text, "\nname = a100-sxm4-40g");
    ck_assert_ptr_nonnull(name);
    memcpy(name + strlen("\nname = "), "z100", 4); /* a GPU with no models/calib/<name>.cfg */
    tu_write_tmp(hw, sizeof hw, ".cfg", text);
    free(text);
    rq = (resolve_req){.hw = hw};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_str_eq(in.hw.name, "z100-sxm4-40g");
    ck_assert_int_eq(in.calib_from, CALIB_DEFAULT);
    ck_assert_str_eq(in.calib_path, "");
    resolve_inputs_free(&in);
    /* the A100 40GB's own: the H200's calibration transferred, an estimate */
    rq = (resolve_req){.hw = under_home(hw, sizeof hw, "models/hw/a100-sxm4-40g.cfg")};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_int_eq(in.calib.transferred, 1);
    ck_assert_msg(strstr(in.calib_path, "models/calib/a100-sxm4-40g.cfg"), "%s", in.calib_path);
    resolve_inputs_free(&in);

    /* The home decides where the defaults are looked for. */
    setenv("UNPAD_HOME", "/nonexistent-unpad-home", 1);
    rq = (resolve_req){0};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_EIO);
    ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent-unpad-home/models/bert-large.cfg"));
    ck_assert_ptr_nonnull(strstr(e.msg, "The project home is /nonexistent-unpad-home"));
    ck_assert_ptr_nonnull(strstr(e.msg, "set UNPAD_HOME"));
    resolve_inputs_free(&in);
}
END_TEST

START_TEST(test_calib_source)
{
    char p[RESOLVE_PATH_LEN], hw[RESOLVE_PATH_LEN], out[512];
    unpad_err e = {0};
    hw_spec h200, a100;
    ck_assert_int_eq(hw_load(under_home(p, sizeof p, "models/hw/h200-sxm.cfg"), &h200, &e), UNPAD_OK);
    ck_assert_int_eq(hw_load(under_home(p, sizeof p, "models/hw/a100-sxm4-40g.cfg"), &a100, &e), UNPAD_OK);
    calib_coef fitted, moved;
    ck_assert_int_eq(calib_load(under_home(p, sizeof p, "models/calib/h200-sxm.cfg"), &h200, &fitted, &e),
                     UNPAD_OK);
    ck_assert_int_eq(calib_source_of(&fitted), CALIB_FITTED);
    fit_transfer(&fitted, &h200, &a100, &moved);
    ck_assert_int_eq(moved.transferred, 1);
    tu_write_tmp(out, sizeof out, ".cfg", "");
    ck_assert_int_eq(calib_write(out, &moved, "transferred for a test", &e), UNPAD_OK);

    /* the written file says so, and the resolver records it */
    resolve_req rq = {.hw = under_home(hw, sizeof hw, "models/hw/a100-sxm4-40g.cfg"), .calib = out};
    resolve_inputs in;
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_int_eq(in.calib_from, CALIB_TRANSFERRED);
    ck_assert_str_eq(calib_source_name(in.calib_from), "transferred");
    ck_assert_str_eq(in.calib_path, out);
    ck_assert_double_eq_tol(in.calib.gemm_m_half, moved.gemm_m_half, 1e-9 * moved.gemm_m_half);
    resolve_inputs_free(&in);

    /* a calibration of other hardware is refused, naming the file */
    rq.hw = NULL;
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, out));
    resolve_inputs_free(&in);
    rq = (resolve_req){.calib = out, .no_calib = 1};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "--no-calib"));
    resolve_inputs_free(&in);
    unlink(out);
}
END_TEST

/* --fp8 on: the GPU's FP8 calibration (models/calib/<hw>-fp8.cfg) where the project has one, else
 * its bf16 one; --no-calib keeps the defaults either way. */
START_TEST(test_calib_fp8)
{
    char p[RESOLVE_PATH_LEN], want[RESOLVE_PATH_LEN];
    unpad_err e = {0};
    resolve_inputs in;
    resolve_req rq = {.fp8 = 1};
    ck_assert_msg(resolve_inputs_load(&rq, &in, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_str_eq(in.calib_path, under_home(want, sizeof want, "models/calib/h200-sxm-fp8.cfg"));
    ck_assert_int_eq(in.calib.fp8, 1);
    ck_assert_int_eq(in.calib_from, CALIB_FITTED);
    resolve_inputs_free(&in);
    rq = (resolve_req){0};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_str_eq(in.calib_path, under_home(want, sizeof want, "models/calib/h200-sxm.cfg"));
    ck_assert_int_eq(in.calib.fp8, 0);
    resolve_inputs_free(&in);
    /* no FP8 calibration of this GPU: its bf16 one */
    rq = (resolve_req){.fp8 = 1, .hw = under_home(p, sizeof p, "models/hw/a100-sxm4-80g.cfg")};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_str_eq(in.calib_path, under_home(want, sizeof want, "models/calib/a100-sxm4-80g.cfg"));
    ck_assert_int_eq(in.calib.fp8, 0);
    resolve_inputs_free(&in);
    rq = (resolve_req){.fp8 = 1, .no_calib = 1};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_str_eq(in.calib_path, "");
    ck_assert_int_eq(in.calib_from, CALIB_DEFAULT);
    resolve_inputs_free(&in);
}
END_TEST

/* A plan file: lpt, free counts, a known cost, groups 128,384 on 3 streams. */
static void write_plan(char *path, size_t n, int tokens)
{
    unpad_plan p;
    unpad_err e = {0};
    plan_default(&p);
    p.policy = BAL_LPT;
    p.count = BAL_FREE;
    p.weights_tokens = tokens;
    p.gpus = 8;
    p.batch = 56;
    p.fmha_nb = 2;
    p.fmha_bounds[0] = 128;
    p.fmha_bounds[1] = 384;
    p.fmha_granularity = 4;
    p.streams = 3;
    p.cost = (seq_cost){11.5, 2.25, 0.125};
    tu_write_tmp(path, n, ".cfg", "");
    ck_assert_int_eq(plan_write(path, &p, &e), UNPAD_OK);
}

START_TEST(test_plan_merge)
{
    char plan[512], calib[RESOLVE_PATH_LEN];
    unpad_err e = {0};
    resolve_inputs in;
    write_plan(plan, sizeof plan, 0);

    /* the plan alone: its policy, count, groups, streams and cost */
    resolve_req rq = {.plan = plan};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_int_eq(in.have_plan, 1);
    ck_assert_str_eq(in.plan_path, plan);
    ck_assert_int_eq(in.plan.policy, BAL_LPT);
    ck_assert_int_eq(in.plan.count, BAL_FREE);
    ck_assert_int_eq(in.plan.fmha_nb, 2);
    ck_assert_int_eq(in.plan.fmha_bounds[1], 384);
    ck_assert_int_eq(in.plan.fmha_granularity, 4);
    ck_assert_int_eq(in.plan.streams, 3);
    ck_assert_double_eq(in.plan.cost.c0, 11.5);
    ck_assert_double_eq(in.plan.cost.c2, 0.125);
    ck_assert_ptr_eq(plan_seq_cost(&in.plan), &in.plan.cost);
    resolve_inputs_free(&in);

    /* flags override the plan */
    rq = (resolve_req){.plan = plan, .policy = "kk", .count = "equal", .fmha_groups = "auto",
                       .streams = 2};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_int_eq(in.plan.policy, BAL_KK);
    ck_assert_int_eq(in.plan.count, BAL_EQUAL);
    ck_assert_int_eq(in.plan.fmha_nb, -1);
    ck_assert_int_eq(in.plan.streams, 2);
    ck_assert_int_eq(in.plan.fmha_granularity, 4); /* no flag: the plan's */
    ck_assert_double_eq(in.plan.cost.c1, 2.25);    /* no --calib: the plan's cost */
    resolve_inputs_free(&in);

    /* --calib: the cost is recomputed from that calibration */
    rq = (resolve_req){.plan = plan, .calib = under_home(calib, sizeof calib, "models/calib/h200-sxm.cfg")};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    seq_cost sc;
    ck_assert_int_eq(cost_seq_model(&in.model, &in.hw, &in.calib, &sc, &e), UNPAD_OK);
    ck_assert_double_eq(in.plan.cost.c0, sc.c0);
    ck_assert_double_eq(in.plan.cost.c1, sc.c1);
    ck_assert_double_eq(in.plan.cost.c2, sc.c2);
    ck_assert(sc.c1 != 2.25);
    ck_assert_int_eq(in.plan.weights_tokens, 0);
    resolve_inputs_free(&in);

    /* --tokens on a cost plan: tokens */
    rq = (resolve_req){.plan = plan, .tokens = 1};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_int_eq(in.plan.weights_tokens, 1);
    ck_assert_ptr_null(plan_seq_cost(&in.plan));
    resolve_inputs_free(&in);
    unlink(plan);

    /* a plan's weights = tokens is kept, even with --calib and a policy flag */
    write_plan(plan, sizeof plan, 1);
    rq = (resolve_req){.plan = plan, .calib = calib, .policy = "sort-deal"};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_int_eq(in.plan.weights_tokens, 1);
    ck_assert_ptr_null(plan_seq_cost(&in.plan));
    ck_assert_int_eq(in.plan.policy, BAL_SORT_DEAL);
    resolve_inputs_free(&in);
    unlink(plan);

    /* no plan, flags only */
    rq = (resolve_req){.policy = "lpt", .count = "free", .fmha_groups = "128,256"};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_int_eq(in.have_plan, 0);
    ck_assert_int_eq(in.plan.policy, BAL_LPT);
    ck_assert_int_eq(in.plan.count, BAL_FREE);
    ck_assert_int_eq(in.plan.fmha_nb, 2);
    ck_assert_int_eq(in.plan.streams, 0);
    resolve_inputs_free(&in);
}
END_TEST

START_TEST(test_errors)
{
    char dist[512];
    unpad_err e = {0};
    resolve_inputs in;
    static const struct { resolve_req rq; const char *says; } bad[] = {
        {{.policy = "fastest"}, "--policy: unknown policy 'fastest' (expected none | sort-deal"},
        {{.policy = "pack"}, "--policy: 'pack' is now 'ffd-tokens'"},
        {{.count = "some"}, "--count: unknown count 'some'"},
        {{.fmha_groups = "384,128"}, "--fmha-groups"},
        {{.streams = 99}, "--streams"},
        {{.model = ""}, "--model: empty"},
        {{.plan = "/nonexistent/plan.cfg"}, "/nonexistent/plan.cfg"},
        {{.hw = "/nonexistent/hw.cfg"}, "/nonexistent/hw.cfg"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = resolve_inputs_load(&bad[i].rq, &in, &e);
        ck_assert_msg(rc != UNPAD_OK, "case %zu accepted", i);
        ck_assert_msg(strstr(e.msg, bad[i].says), "case %zu: '%s' does not say '%s'", i, e.msg,
                      bad[i].says);
        resolve_inputs_free(&in);
    }
    /* lengths the model cannot train */
    tu_write_tmp(dist, sizeof dist, ".csv", "length,count\n100,3\n600,1\n");
    resolve_req rq = {.dist = dist, .need_dist = 1};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, dist));
    ck_assert_ptr_nonnull(strstr(e.msg, "600"));
    ck_assert_ptr_nonnull(strstr(e.msg, "--max-len"));
    resolve_inputs_free(&in);
    /* a cap truncates them: the distribution is cut to the model's max_len, nothing lost */
    rq.max_len = 256;
    ck_assert_msg(resolve_inputs_load(&rq, &in, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(in.dist_longest, 600);
    ck_assert_int_eq(in.dist.max_len, in.model.max_len);
    ck_assert_double_eq(in.dist.count[in.model.max_len], 1);
    ck_assert_double_eq(in.dist.count[100], 3);
    ck_assert_double_eq(in.dist.total, 4);
    resolve_inputs_free(&in);
    /* a cap the model cannot train is the cap's error */
    rq.max_len = 600;
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "--max-len 600"));
    resolve_inputs_free(&in);
    unlink(dist);
}
END_TEST

START_TEST(test_names)
{
    char p[RESOLVE_PATH_LEN], q[RESOLVE_PATH_LEN];
    unpad_err e = {0};
    resolve_inputs in;
    /* bare names are the project's files, with or without their extension */
    resolve_req rq = {.model = "bert-base", .hw = "h200-sxm.cfg", .dist = "short.csv", .calib = "h200-sxm",
                      .need_dist = 1};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_str_eq(in.model_path, under_home(p, sizeof p, "models/bert-base.cfg"));
    ck_assert_str_eq(in.model.name, "bert-base");
    ck_assert_str_eq(in.hw_path, under_home(p, sizeof p, "models/hw/h200-sxm.cfg"));
    ck_assert_str_eq(in.dist_path, under_home(p, sizeof p, "models/dists/short.csv"));
    ck_assert_str_eq(in.calib_path, under_home(p, sizeof p, "models/calib/h200-sxm.cfg"));
    resolve_inputs_free(&in);
    /* a name that is no project file: the flag, both places looked in, and what there is */
    rq = (resolve_req){.model = "bert-larg"};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "--model bert-larg"));
    ck_assert_ptr_nonnull(strstr(e.msg, under_home(p, sizeof p, "models/bert-larg.cfg")));
    ck_assert_ptr_nonnull(strstr(e.msg, "bert-base, bert-large, bert-tiny"));
    resolve_inputs_free(&in);
    /* a list where one file goes */
    rq = (resolve_req){.hw = "h200-sxm,h100-sxm"};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "one file, not a list (several go with `unpad plan --hw A,B`)"));
    resolve_inputs_free(&in);
    /* a path with a folder is never looked up by name; a file here wins over the project's */
    rq = (resolve_req){.dist = "./short", .need_dist = 1};
    ck_assert_int_ne(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_ptr_nonnull(strstr(e.msg, "./short"));
    resolve_inputs_free(&in);
    ck_assert_int_eq(resolve_named(under_home(q, sizeof q, "models/bert-tiny.cfg"), "--model", "models", ".cfg", p,
                                   sizeof p, &e), UNPAD_OK);
    ck_assert_str_eq(p, q);
    ck_assert_int_eq(resolve_named("x", "--plan", NULL, NULL, p, sizeof p, &e), UNPAD_OK);
    ck_assert_str_eq(p, "x");
    /* a folder of that name here (a checkpoint's, say) does not hide the project's file */
    char cwd[1024], tmp[] = "/tmp/unpad-test-cwd-XXXXXX";
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    ck_assert_int_eq(chdir(tmp), 0);
    ck_assert_int_eq(mkdir("bert-base", 0700), 0);
    int rc = resolve_named("bert-base", "--model", "models", ".cfg", p, sizeof p, &e);
    rmdir("bert-base");
    ck_assert_int_eq(chdir(cwd), 0);
    rmdir(tmp);
    ck_assert_int_eq(rc, UNPAD_OK);
    ck_assert_str_eq(p, under_home(q, sizeof q, "models/bert-base.cfg"));
    ck_assert_int_eq(resolve_named("bert-base", "--model", "models", ".cfg", p, 8, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "too long"));
}
END_TEST

/* The GPU's name picks the spec whose `device` it is, unless --hw names one; no spec names it:
 * the default. Two specs naming it, or a spec that does not load, are errors naming the files. */
/* --hw-set: the spec's numbers for a what-if, checked as the file's; the name and the device refused,
 * and a refused set changes nothing. */
START_TEST(test_hw_set)
{
    unpad_err e = {0};
    resolve_req rq = {.hw = "h100-sxm", .hw_set = "gpus_per_node=4,node_bw_gbs=25"};
    resolve_inputs in;
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_int_eq(in.hw.gpus_per_node, 4);
    ck_assert_double_eq(in.hw.node_bw_gbs, 25);
    ck_assert_double_eq(in.hw.link_bw_gbs, 370); /* the others as the file has them */
    ck_assert_str_eq(in.hw.name, "h100-sxm");
    ck_assert_str_eq(in.hw_set, "gpus_per_node=4,node_bw_gbs=25");
    ck_assert_int_eq(in.calib_from, CALIB_FITTED); /* the spec's own calibration */
    hw_spec h = in.hw, before = in.hw;
    resolve_inputs_free(&in);
    const char *bad[] = {"name=h200-sxm", "device=X", "sms=0", "sms=132,foo=1", "sms", "sms=1,", ",", "sms=1,sms=2",
                         "clock_ghz=abc"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_msg(resolve_hw_set(bad[i], &h, &e) != UNPAD_OK, "%s accepted", bad[i]);
        ck_assert_msg(strstr(e.msg, "--hw-set") != NULL, "%s: %s", bad[i], e.msg);
        ck_assert_int_eq(memcmp(&h, &before, sizeof h), 0);
    }
}
END_TEST

START_TEST(test_hw_for_device)
{
    char p[RESOLVE_PATH_LEN];
    unpad_err e = {0};
    resolve_inputs in;
    resolve_req rq = {.device = "NVIDIA H100 80GB HBM3"};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_str_eq(in.hw.name, "h100-sxm");
    ck_assert_str_eq(in.hw_path, under_home(p, sizeof p, "models/hw/h100-sxm.cfg"));
    ck_assert_int_eq(in.hw_from, HW_MATCHED);
    ck_assert_str_eq(in.calib_path, under_home(p, sizeof p, "models/calib/h100-sxm.cfg"));
    resolve_inputs_free(&in);
    rq = (resolve_req){.device = "NVIDIA A100-SXM4-40GB"};
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_str_eq(in.hw.name, "a100-sxm4-40g");
    resolve_inputs_free(&in);
    rq = (resolve_req){.device = "NVIDIA H100 PCIe"}; /* no spec names it */
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_str_eq(in.hw.name, "h200-sxm");
    ck_assert_int_eq(in.hw_from, HW_DEFAULT);
    resolve_inputs_free(&in);
    rq = (resolve_req){.device = "NVIDIA H100 80GB HBM3", .hw = "a100-sxm4-80g"}; /* --hw wins */
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_str_eq(in.hw.name, "a100-sxm4-80g");
    ck_assert_int_eq(in.hw_from, HW_GIVEN);
    resolve_inputs_free(&in);

    /* another home: two specs naming one device, then one of them broken */
    char dir[] = "/tmp/unpad-test-home-XXXXXX", sub[256], a[300], b[300], model[RESOLVE_PATH_LEN];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sub, sizeof sub, "%s/models", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    snprintf(sub, sizeof sub, "%s/models/hw", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    const char *spec = "peak_bf16_tflops = 100\npeak_tf32_tflops = 50\npeak_fp32_tflops = 10\nmem_bw_gbs = 1000\n"
                       "memory_gib = 16\ncontext_gib = 0.5\nsms = 40\nl2_mb = 4\nsmem_per_sm_kb = 64\nlaunch_us = 3\n"
                       "gpus_per_node = 8\nlink_bw_gbs = 100\nlink_lat_us = 10\nnode_bw_gbs = 10\nnode_lat_us = 10\n"
                       "device = Fake GPU 16GB\n";
    snprintf(a, sizeof a, "%s/fake-a.cfg", sub);
    snprintf(b, sizeof b, "%s/fake-b.cfg", sub);
    FILE *f = fopen(a, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "name = fake-a\n%s", spec);
    fclose(f);
    rq = (resolve_req){.device = "Fake GPU 16GB", .model = under_home(model, sizeof model, "models/bert-tiny.cfg")};
    setenv("UNPAD_HOME", dir, 1);
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_OK);
    ck_assert_str_eq(in.hw.name, "fake-a");
    ck_assert_str_eq(in.hw_path, a);
    ck_assert_int_eq(in.calib_from, CALIB_DEFAULT); /* no models/calib/fake-a.cfg there */
    resolve_inputs_free(&in);
    f = fopen(b, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "name = fake-b\n%s", spec);
    fclose(f);
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "fake-a.cfg"));
    ck_assert_ptr_nonnull(strstr(e.msg, "fake-b.cfg"));
    ck_assert_ptr_nonnull(strstr(e.msg, "device = Fake GPU 16GB"));
    resolve_inputs_free(&in);
    f = fopen(b, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "name = fake-b\nsms = many\n");
    fclose(f);
    ck_assert_int_eq(resolve_inputs_load(&rq, &in, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "fake-b.cfg:2"));
    ck_assert_ptr_nonnull(strstr(e.msg, "looking for the spec of the GPU 'Fake GPU 16GB'"));
    resolve_inputs_free(&in);
    unlink(a);
    unlink(b);
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/models", dir);
    rmdir(sub);
    rmdir(dir);
}
END_TEST

Suite *resolve_suite(void)
{
    Suite *s = suite_create("resolve");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_home);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_calib_source);
    tcase_add_test(tc, test_calib_fp8);
    tcase_add_test(tc, test_plan_merge);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_hw_for_device);
    tcase_add_test(tc, test_hw_set);
    suite_add_tcase(s, tc);
    return s;
}
