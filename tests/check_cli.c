/* check_cli.c — the `unpad` program's outputs: every --json document has exactly the keys
 * docs/json.md lists for its command, with their types (the tables there are read here, so the
 * documentation and the program cannot drift apart), plus values that must hold; partial and
 * final files of a sweep, plan files per configuration, provenance in the CSVs. The program is
 * $UNPAD_BIN (set by `make test` and `make test-asan`), else bin/unpad under the project. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "jsonread.h"
#include "trace.h"
#include "testutil.h"
#include "unpad.h"

/* ---- the documented keys ----------------------------------------------------------------------- */

typedef struct {
    char path[160];  /* relative to its table: "rows[].gpus" */
    char type[32];   /* "number|null", "row", ... */
} doc_key;

typedef struct {
    char name[32];   /* the command ("stats"), "*" for every document, or an object type */
    int is_type;
    doc_key keys[160];
    int n;
} doc_table;

static doc_table TABLES[16];
static int NTABLES;

static const doc_table *table_named(const char *name, int is_type)
{
    for (int i = 0; i < NTABLES; i++)
        if (TABLES[i].is_type == is_type && !strcmp(TABLES[i].name, name))
            return &TABLES[i];
    return NULL;
}

/* Reads the tables of docs/json.md: "## Every document", "## `unpad CMD`" and, under
 * "## Object types", "### `TYPE`"; rows "| `key` | type | unit | meaning |". */
static void load_doc(void)
{
    if (NTABLES)
        return;
    char path[512], *text;
    unpad_err e = {0};
    ck_assert_msg(unpad_read_file(tu_path(path, sizeof path, "docs/json.md"), &text, NULL, &e) ==
                      UNPAD_OK, "%s", e.msg);
    doc_table *t = NULL;
    int in_types = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        const char *tick = strchr(line, '`');
        if (!strncmp(line, "## ", 3)) {
            in_types = strstr(line, "Object types") != NULL;
            t = NULL;
            if (!strcmp(line, "## Every document") || (tick && !strncmp(tick, "`unpad ", 7))) {
                ck_assert_int_lt(NTABLES, 16);
                t = &TABLES[NTABLES++];
                if (tick)
                    sscanf(tick + 7, "%31[^`]", t->name);
                else
                    strcpy(t->name, "*");
            }
        } else if (!strncmp(line, "### ", 4) && in_types && tick) {
            ck_assert_int_lt(NTABLES, 16);
            t = &TABLES[NTABLES++];
            t->is_type = 1;
            sscanf(tick + 1, "%31[^`]", t->name);
        } else if (t && !strncmp(line, "| `", 3)) {
            ck_assert_int_lt(t->n, 160);
            doc_key *k = &t->keys[t->n++];
            ck_assert_int_eq(sscanf(line + 3, "%159[^`]", k->path), 1);
            const char *cell = strchr(line + 3, '|');
            ck_assert_ptr_nonnull(cell);
            size_t o = 0;
            for (cell++; *cell && !(*cell == '|' && cell[-1] != '\\') && o + 1 < sizeof k->type;
                 cell++)
                if (*cell != ' ' && *cell != '\\')
                    k->type[o++] = *cell;
            k->type[o] = '\0';
        }
    }
    free(text);
    ck_assert_int_ge(NTABLES, 9); /* every document, 6 commands, 2 object types */
}

static const doc_key *key_at(const doc_table *t, const char *path)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->keys[i].path, path))
            return &t->keys[i];
    return NULL;
}

static int type_ok(const jr_node *v, const char *one)
{
    switch (v->t) {
    case JR_NULL: return !strcmp(one, "null");
    case JR_BOOL: return !strcmp(one, "boolean");
    case JR_STR: return !strcmp(one, "string");
    case JR_NUM: return !strcmp(one, "number") || (!strcmp(one, "integer") && v->is_int);
    case JR_ARR: return !strcmp(one, "array");
    case JR_OBJ: return !strcmp(one, "object") || table_named(one, 1);
    }
    return 0;
}

/* The checker returns 0, or 1 with the reason in WHY (so its own test can see it fail). */
static char WHY[600];

static int doc_fail(const char *fmt, const char *a, const char *b)
{
    snprintf(WHY, sizeof WHY, fmt, a, b);
    return 1;
}

static int check_object(const jr_node *obj, const doc_table *t, const char *prefix,
                        const char *where);

/* v (at where) against the documented entry k of table t. */
static int check_value(const jr_node *v, const doc_key *k, const doc_table *t, const char *where)
{
    char types[32], *save = NULL, *match = NULL;
    snprintf(types, sizeof types, "%s", k->type);
    for (char *one = strtok_r(types, "|", &save); one && !match; one = strtok_r(NULL, "|", &save))
        if (type_ok(v, one))
            match = one;
    if (!match)
        return doc_fail("%s: not of the documented type %s", where, k->type);
    char sub[200], at[400];
    if (v->t == JR_OBJ) {
        const doc_table *named = table_named(match, 1);
        snprintf(sub, sizeof sub, "%s.", k->path);
        return check_object(v, named ? named : t, named ? "" : sub, where);
    }
    if (v->t == JR_ARR) {
        snprintf(sub, sizeof sub, "%s[]", k->path);
        const doc_key *e = key_at(t, sub);
        if (!e)
            return doc_fail("%s: its elements (%s) are not documented", where, sub);
        for (int i = 0; i < v->n; i++) {
            snprintf(at, sizeof at, "%s[%d]", where, i);
            if (check_value(v->kids[i], e, t, at))
                return 1;
        }
    }
    return 0;
}

/* Every key of obj documented under prefix in t, and every key documented there present. */
static int check_object(const jr_node *obj, const doc_table *t, const char *prefix,
                        const char *where)
{
    char path[200], at[400];
    size_t pl = strlen(prefix);
    for (int i = 0; i < obj->n; i++) {
        snprintf(path, sizeof path, "%s%s", prefix, obj->keys[i]);
        const doc_key *k = key_at(t, path);
        snprintf(at, sizeof at, "%s%s%s", where, *where ? "." : "", obj->keys[i]);
        if (!k)
            return doc_fail("%s is not in docs/json.md (table %s)", at, t->name);
        if (check_value(obj->kids[i], k, t, at))
            return 1;
    }
    for (int i = 0; i < t->n; i++) {
        const char *p = t->keys[i].path;
        if (strncmp(p, prefix, pl) || strchr(p + pl, '.') || strchr(p + pl, '['))
            continue;
        if (!jr_get(obj, p + pl))
            return doc_fail(*where ? "%s.%s is documented but missing" : "%s%s is documented but "
                            "missing", where, p + pl);
    }
    return 0;
}

/* The document of `command` against the common table and the table named `table` ("validate
 * --workloads": a mode of validate with keys of its own). */
static void check_doc_as(const jr_node *doc, const char *table, const char *command)
{
    load_doc();
    const doc_table *all = table_named("*", 0), *cmd = table_named(table, 0);
    ck_assert_msg(all && cmd, "docs/json.md has no table for %s", table);
    doc_table merged = *all;
    snprintf(merged.name, sizeof merged.name, "%s", command);
    for (int i = 0; i < cmd->n; i++) {
        ck_assert_int_lt(merged.n, 160);
        merged.keys[merged.n++] = cmd->keys[i];
    }
    ck_assert_msg(check_object(doc, &merged, "", "") == 0, "unpad %s --json: %s", command, WHY);
    ck_assert_int_eq(jr_get(doc, "unpad_json")->num, 1);
    ck_assert_str_eq(jr_get(doc, "command")->str, command);
}

static void check_doc(const jr_node *doc, const char *command) { check_doc_as(doc, command, command); }

/* ---- running unpad ----------------------------------------------------------------------------- */

static char OUTDIR[64];

static const char *unpad_bin(void)
{
    static char buf[512];
    const char *b = getenv("UNPAD_BIN");
    if (b && *b)
        return b;
    return tu_path(buf, sizeof buf, "bin/unpad");
}

/* Runs `unpad ARGS` (a shell fragment; %D is the test folder) with its standard output in
 * OUTDIR/stdout.txt; returns the exit status. */
static int run(const char *args)
{
    char expanded[2048], cmd[4096];
    size_t o = 0;
    for (const char *a = args; *a && o + 70 < sizeof expanded; a++) {
        if (a[0] == '%' && a[1] == 'D') {
            o += (size_t)snprintf(expanded + o, sizeof expanded - o, "%s", OUTDIR);
            a++;
        } else {
            expanded[o++] = *a;
        }
    }
    expanded[o] = '\0';
    snprintf(cmd, sizeof cmd, "'%s' %s > '%s/stdout.txt'", unpad_bin(), expanded, OUTDIR);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Writes OUTDIR/name with text (a test's input file). */
static void put_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", OUTDIR, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static jr_node *load_json(const char *name)
{
    char path[256], *text, why[160];
    unpad_err e = {0};
    snprintf(path, sizeof path, "%s/%s", OUTDIR, name);
    ck_assert_msg(unpad_read_file(path, &text, NULL, &e) == UNPAD_OK, "%s", e.msg);
    jr_node *v = jr_parse(text, why, sizeof why);
    ck_assert_msg(v != NULL, "%s: %s", path, why);
    free(text);
    return v;
}

static const jr_node *at(const jr_node *v, const char *dotted)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", dotted);
    for (char *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = jr_get(v, k);
    ck_assert_msg(v != NULL, "no %s", dotted);
    return v;
}

/* The whole of OUTDIR/name (the caller frees it). */
static char *slurp(const char *name)
{
    char path[256], *text = NULL;
    unpad_err e = {0};
    snprintf(path, sizeof path, "%s/%s", OUTDIR, name);
    ck_assert_msg(unpad_read_file(path, &text, NULL, &e) == UNPAD_OK, "%s", e.msg);
    return text;
}

static int exists(const char *name)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", OUTDIR, name);
    return stat(path, &st) == 0;
}

static void setup(void)
{
    snprintf(OUTDIR, sizeof OUTDIR, "/tmp/unpad-cli-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(OUTDIR));
    struct stat st;
    ck_assert_msg(stat(unpad_bin(), &st) == 0, "%s is not built (make test builds it)", unpad_bin());
    load_doc();
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", OUTDIR);
    ck_assert_int_eq(system(cmd), 0);
}

/* ---- the tests --------------------------------------------------------------------------------- */

START_TEST(test_stats_datamove)
{
    ck_assert_int_eq(run("stats --json %D/s.json"), 0);
    jr_node *v = load_json("s.json");
    check_doc(v, "stats");
    ck_assert_double_eq(at(v, "stats.sequences")->num, 16279552);
    ck_assert_double_eq_tol(at(v, "stats.padding_fraction")->num, 0.5003, 1e-4);
    ck_assert_int_eq(at(v, "provenance.model")->t, JR_NULL);
    ck_assert_ptr_nonnull(strstr(at(v, "provenance.distribution_path")->str, "wiki512.csv"));
    ck_assert_int_gt(strlen(at(v, "provenance.commit")->str), 6);
    jr_free(v);
    /* --json -: standard output holds the document and nothing else */
    ck_assert_int_eq(run("stats --json -"), 0);
    v = load_json("stdout.txt");
    check_doc(v, "stats");
    jr_free(v);

    /* fractional counts: the text shows the total the JSON has, and says they are weights */
    FILE *f;
    char path[256];
    snprintf(path, sizeof path, "%s/frac.csv", OUTDIR);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs("length,count\n100,2.5\n", f);
    fclose(f);
    ck_assert_int_eq(run("stats --dist %D/frac.csv --json %D/frac.json"), 0);
    char *text = slurp("stdout.txt");
    ck_assert_msg(strstr(text, "\nsequences      2.5 (the file's counts have fractions: weights"), "%s", text);
    free(text);
    v = load_json("frac.json");
    ck_assert_double_eq(at(v, "stats.sequences")->num, 2.5);
    jr_free(v);

    /* a pad length shorter than the longest sequence is refused, not reported as 0% padding */
    ck_assert_int_eq(run("stats --dist short --pad 10 --json %D/s10.json"), 2);
    ck_assert(!exists("s10.json"));
    ck_assert_int_eq(run("stats --dist short --pad 600"), 0);

    ck_assert_int_eq(run("datamove --batch 2 --seq 64 --json %D/d.json"), 0);
    v = load_json("d.json");
    check_doc(v, "datamove");
    ck_assert_int_eq(at(v, "config.seq_len")->num, 64);
    ck_assert(at(v, "total.fused_bytes")->num < at(v, "total.unfused_bytes")->num);
    ck_assert_str_eq(at(v, "provenance.calibration")->str, "fitted");
    ck_assert_ptr_nonnull(strstr(at(v, "provenance.calibration_path")->str, "models/calib/"));
    jr_free(v);
}
END_TEST

START_TEST(test_predict)
{
    ck_assert_int_eq(run("predict --batch 8 --steps 4 --padded --seed 3 --json %D/p.json "
                         "--csv %D/p.csv"), 0);
    jr_node *v = load_json("p.json");
    check_doc(v, "predict");
    ck_assert_int_eq(at(v, "expected.steps")->num, 4);
    ck_assert_double_gt(at(v, "expected.speedup")->num, 1);
    /* Wikipedia lengths move the step from batch to batch: a spread, and the steps it asks for */
    ck_assert_double_gt(at(v, "expected.step_sd_us")->num, 0);
    double sd = at(v, "expected.step_sd_us")->num, mean = at(v, "expected.step_us")->num;
    ck_assert_double_eq(at(v, "expected.steps_for_1pct")->num, ceil(pow(164.5 * sd / mean, 2)));
    ck_assert_int_eq(at(v, "provenance.seed")->num, 3);
    jr_free(v);
    /* the padded rows beside, named before the extension */
    ck_assert(exists("p.csv") && exists("p-padded.csv") && !exists("p.csv.padded.csv"));
    /* without --padded the padded values are null, not numbers */
    ck_assert_int_eq(run("predict --batch 8 --steps 2 --no-calib --json %D/q.json"), 0);
    v = load_json("q.json");
    check_doc(v, "predict");
    ck_assert_int_eq(at(v, "expected.padded_step_us")->t, JR_NULL);
    ck_assert_int_eq(at(v, "config.pad_len")->t, JR_NULL);
    ck_assert_double_ge(at(v, "expected.steps_for_1pct")->num, 1);
    ck_assert_str_eq(at(v, "provenance.calibration")->str, "default");
    ck_assert_int_eq(at(v, "provenance.calibration_path")->t, JR_NULL);
    jr_free(v);
    /* one step: no spread to give */
    ck_assert_int_eq(run("predict --batch 8 --steps 1 --json %D/one.json"), 0);
    v = load_json("one.json");
    check_doc(v, "predict");
    ck_assert_int_eq(at(v, "expected.step_sd_us")->t, JR_NULL);
    ck_assert_int_eq(at(v, "expected.steps_for_1pct")->t, JR_NULL);
    jr_free(v);
    /* every sequence of one length: every batch the same, no spread, one step is enough */
    put_file("one-len.csv", "length,count\n200,1\n");
    ck_assert_int_eq(run("predict --dist %D/one-len.csv --batch 8 --steps 5 --json %D/c.json"), 0);
    v = load_json("c.json");
    check_doc(v, "predict");
    ck_assert_double_eq(at(v, "expected.step_sd_us")->num, 0);
    ck_assert_double_eq(at(v, "expected.steps_for_1pct")->num, 1);
    jr_free(v);
}
END_TEST

START_TEST(test_names)
{
    /* the project's files by name: --model, --hw, --dist */
    ck_assert_int_eq(run("predict --model bert-base --hw a100-sxm4-40g --dist short --batch 8 --steps 2 "
                         "--json %D/n.json"), 0);
    jr_node *v = load_json("n.json");
    check_doc(v, "predict");
    const char *mp = at(v, "provenance.model_path")->str, *dp = at(v, "provenance.distribution_path")->str;
    const char *me = "/models/bert-base.cfg", *de = "/models/dists/short.csv";
    ck_assert_msg(strlen(mp) > strlen(me) && !strcmp(mp + strlen(mp) - strlen(me), me), "%s", mp);
    ck_assert_msg(strlen(dp) > strlen(de) && !strcmp(dp + strlen(dp) - strlen(de), de), "%s", dp);
    ck_assert_str_eq(at(v, "provenance.hw")->str, "a100-sxm4-40g");
    jr_free(v);
    /* a name that is none of them: refused, nothing written */
    ck_assert_int_eq(run("predict --model bert-huge --json %D/m.json 2> %D/err.txt"), 1);
    ck_assert(!exists("m.json"));
    /* a name resolves before the outputs are checked against the inputs: no overwrite by name */
    ck_assert_int_eq(run("calibrate --transfer h200-sxm --hw a100-sxm4-40g --out %D/t.cfg"), 0);
    ck_assert(exists("t.cfg"));
    ck_assert_int_eq(run("calibrate --transfer %D/t.cfg --hw h200-sxm --out %D/t.cfg 2> %D/err.txt"), 1);
    ck_assert_int_eq(run("validate --traces %D/t.csv --model bert-bse 2> %D/err.txt"), 2);
}
END_TEST

/* The README's first example shows figures of `unpad predict --max-len 256`: they must be what the
 * command prints with the committed calibration. */
START_TEST(test_readme_example)
{
    char path[512], *text;
    unpad_err e = {0};
    ck_assert_int_eq(unpad_read_file(tu_path(path, sizeof path, "README.md"), &text, NULL, &e), UNPAD_OK);
    const char *key = "#   throughput (samples/s: samples / total time)";
    const char *at_line = strstr(text, key);
    ck_assert_msg(at_line != NULL, "README.md has no line '%s'", key);
    double capped = 0, full = 0;
    ck_assert_int_eq(sscanf(at_line + strlen(key), " %lf %lf", &capped, &full), 2); /* capped, no cap */
    free(text);
    ck_assert_int_eq(run("predict --max-len 256 --json %D/r.json"), 0);
    jr_node *v = load_json("r.json");
    const jr_node *lay = at(v, "layouts");
    ck_assert_int_eq(lay->n, 2);
    double c = jr_get(lay->kids[0], "samples_per_s")->num, f = jr_get(lay->kids[1], "samples_per_s")->num;
    ck_assert_msg(fabs(c - capped) < 0.051 && fabs(f - full) < 0.051,
                  "README.md says %.1f capped, %.1f no cap; unpad predict --max-len 256 says %.1f, %.1f: "
                  "update the README's examples", capped, full, c, f);
    jr_free(v);
}
END_TEST

START_TEST(test_time_to_train)
{
    ck_assert_int_eq(run("whatif --gpus 8,64 --batch 8 --policy kk --steps 5 --attn-steps 0 --train-samples 2.5M "
                         "--price 2 --json %D/t.json --csv %D/t.csv"), 0);
    jr_node *v = load_json("t.json");
    check_doc(v, "whatif");
    ck_assert_double_eq(at(v, "config.train_samples")->num, 2.5e6);
    ck_assert_double_eq(at(v, "config.price_per_gpu_hour")->num, 2);
    const jr_node *rows = at(v, "rows");
    ck_assert_int_eq(rows->n, 2);
    for (int i = 0; i < rows->n; i++) {
        const jr_node *r = rows->kids[i];
        double sps = jr_get(r, "samples_per_s")->num, h = jr_get(r, "train_hours")->num;
        ck_assert_double_eq_tol(h, 2.5e6 / sps / 3600, 1e-9 * h);
        ck_assert_double_eq_tol(jr_get(r, "gpu_hours")->num, jr_get(r, "gpus")->num * h, 1e-9 * h * 64);
        ck_assert_double_eq_tol(jr_get(r, "cost")->num, 2 * jr_get(r, "gpu_hours")->num, 1e-6);
    }
    jr_free(v);
    ck_assert_int_eq(run("plan --gpus 8 --batch 8 --steps 5 --train-samples 400k --json %D/p.json"), 0);
    v = load_json("p.json");
    check_doc(v, "plan");
    const jr_node *p0 = at(v, "plans")->kids[0];
    ck_assert_double_eq_tol(jr_get(p0, "pred_train_hours")->num,
                            4e5 / jr_get(p0, "pred_samples_per_s")->num / 3600, 1e-9);
    ck_assert_int_eq(jr_get(p0, "pred_cost")->t, JR_NULL); /* no price */
    jr_free(v);
    ck_assert_int_eq(run("predict --batch 8 --steps 3 --layout unpadded,padded --train-samples 1e6 --price 1.5 "
                         "--json %D/q.json"), 0);
    v = load_json("q.json");
    check_doc(v, "predict");
    const jr_node *lay = at(v, "layouts");
    for (int i = 0; i < lay->n; i++) {
        const jr_node *l = lay->kids[i];
        ck_assert_double_eq_tol(jr_get(l, "train_hours")->num, 1e6 / jr_get(l, "samples_per_s")->num / 3600, 1e-9);
        ck_assert_double_eq_tol(jr_get(l, "cost")->num, 1.5 * jr_get(l, "gpu_hours")->num, 1e-9);
    }
    jr_free(v);
    /* a configuration that does not fit trains nothing: no hours or cost, in whatif and predict */
    ck_assert_int_eq(run("whatif --hw a100-sxm4-40g --gpus 8 --batch 56,256 --policy kk --steps 5 --attn-steps 0 "
                         "--train-samples 1M --price 2 --json %D/nf.json"), 0);
    v = load_json("nf.json");
    rows = at(v, "rows");
    ck_assert_int_eq(rows->n, 2);
    for (int i = 0; i < rows->n; i++) {
        const jr_node *r = rows->kids[i];
        int fits = (int)jr_get(r, "memory_fits")->num, big = jr_get(r, "batch")->num == 256;
        ck_assert_int_eq(fits, !big);
        ck_assert_int_eq(jr_get(r, "train_hours")->t == JR_NULL, big);
        ck_assert_int_eq(jr_get(r, "cost")->t == JR_NULL, big);
    }
    jr_free(v);
    /* one that fits with under 1% to spare is marked so */
    ck_assert_int_eq(run("whatif --hw a100-sxm4-40g --gpus 8 --batch 56,125 --policy kk --steps 5 --attn-steps 0 "
                         "--quiet"), 0);
    char tp[256], *tt;
    unpad_err te = {0};
    snprintf(tp, sizeof tp, "%s/stdout.txt", OUTDIR);
    ck_assert_int_eq(unpad_read_file(tp, &tt, NULL, &te), UNPAD_OK);
    const char *r125 = strstr(tt, "    125 kk"), *r56 = strstr(tt, "     56 kk");
    ck_assert(r125 && r56);
    ck_assert_msg(strstr(r125, "TIGHT") && strstr(r125, "TIGHT") < strchr(r125, '\n'), "%s", tt);
    ck_assert_msg(!strstr(r56, "TIGHT") || strstr(r56, "TIGHT") > strchr(r56, '\n'), "%s", tt);
    free(tt);
    ck_assert_int_eq(run("predict --hw a100-sxm4-40g --batch 100 --steps 3 --layout unpadded,padded "
                         "--train-samples 1M --price 2 --json %D/nf.json"), 0);
    v = load_json("nf.json");
    lay = at(v, "layouts");
    ck_assert_int_eq(lay->n, 2);
    ck_assert_int_eq((int)jr_get(lay->kids[0], "fits")->num, 1);
    ck_assert(jr_get(lay->kids[0], "train_hours")->num > 0);
    ck_assert_int_eq((int)jr_get(lay->kids[1], "fits")->num, 0);
    ck_assert(jr_get(lay->kids[1], "mem_gib")->num > 39.6);
    ck_assert_int_eq(jr_get(lay->kids[1], "train_hours")->t, JR_NULL);
    ck_assert_int_eq(jr_get(lay->kids[1], "cost")->t, JR_NULL);
    jr_free(v);
    /* a what-if speed-up: said in the provenance and the plan's calibration label */
    ck_assert_int_eq(run("predict --batch 8 --steps 3 --faster attention=1.3 --json %D/f.json"), 0);
    v = load_json("f.json");
    check_doc(v, "predict");
    ck_assert_str_eq(at(v, "provenance.faster")->str, "attention=1.3");
    jr_free(v);
    ck_assert_int_eq(run("plan --gpus 2 --batch 8 --steps 3 --faster gemm=1.1 --out %D/f.cfg"), 0);
    char fp[256], *ft;
    unpad_err fe = {0};
    snprintf(fp, sizeof fp, "%s/f.cfg", OUTDIR);
    ck_assert_int_eq(unpad_read_file(fp, &ft, NULL, &fe), UNPAD_OK);
    ck_assert_msg(strstr(ft, "what-if --faster gemm=1.1"), "%s", ft);
    free(ft);
    /* the suffixes in either case: m million, B billion */
    ck_assert_int_eq(run("predict --batch 8 --steps 2 --train-samples 256m --json %D/m.json"), 0);
    v = load_json("m.json");
    ck_assert_double_eq(at(v, "config.train_samples")->num, 2.56e8);
    jr_free(v);
    ck_assert_int_eq(run("predict --batch 8 --steps 2 --train-samples 1B --json %D/m.json"), 0);
    v = load_json("m.json");
    ck_assert_double_eq(at(v, "config.train_samples")->num, 1e9);
    jr_free(v);
    /* without the flags: null */
    ck_assert_int_eq(run("predict --batch 8 --steps 2 --json %D/n.json"), 0);
    v = load_json("n.json");
    ck_assert_int_eq(at(v, "config.train_samples")->t, JR_NULL);
    ck_assert_int_eq(jr_get(at(v, "layouts")->kids[0], "train_hours")->t, JR_NULL);
    jr_free(v);
    /* accumulation: the rows' accum, sequences a step gpus x accum x batch */
    ck_assert_int_eq(run("whatif --gpus 2 --batch 4 --accum 1,3 --policy kk --steps 5 --attn-steps 0 "
                         "--json %D/a.json"), 0);
    v = load_json("a.json");
    check_doc(v, "whatif");
    rows = at(v, "rows");
    ck_assert_int_eq(rows->n, 2);
    ck_assert_int_eq(jr_get(rows->kids[0], "accum")->num, 1);
    ck_assert_int_eq(jr_get(rows->kids[1], "accum")->num, 3);
    const jr_node *r1 = rows->kids[1];
    ck_assert_double_eq_tol(jr_get(r1, "samples_per_s")->num, 2.0 * 3 * 4 / (jr_get(r1, "step_us")->num * 1e-6),
                            1e-6 * jr_get(r1, "samples_per_s")->num);
    jr_free(v);
    ck_assert_int_eq(run("plan --gpus 2 --batch 4 --accum 3 --steps 5 --json %D/pa.json"), 0);
    v = load_json("pa.json");
    check_doc(v, "plan");
    ck_assert_int_eq(at(v, "config.accum")->num, 3);
    const jr_node *cand = jr_get(at(v, "plans")->kids[0], "candidates");
    ck_assert_int_eq(jr_get(cand->kids[0], "accum")->num, 3);
    jr_free(v);
    ck_assert_int_eq(run("whatif --accum 2 --virtual-ranks 2> %D/err.txt"), 2);
    /* predict: K micro-batches a step, LAMB once: more samples/s than one micro-batch a step */
    ck_assert_int_eq(run("predict --batch 8 --steps 4 --json %D/p1.json"), 0);
    ck_assert_int_eq(run("predict --batch 8 --steps 4 --accum 4 --json %D/p4.json"), 0);
    jr_node *p1 = load_json("p1.json"), *p4 = load_json("p4.json");
    check_doc(p4, "predict");
    ck_assert_int_eq(at(p4, "config.accum")->num, 4);
    double s1 = at(p1, "expected.samples_per_s")->num, s4 = at(p4, "expected.samples_per_s")->num;
    double t1 = at(p1, "expected.step_us")->num, t4 = at(p4, "expected.step_us")->num;
    ck_assert_msg(s4 > s1 && t4 < 4 * t1 && t4 > 3 * t1, "1: %g/s %g us, 4: %g/s %g us", s1, t1, s4, t4);
    ck_assert_double_eq_tol(s4, 4.0 * 8 * 1e6 / t4, 1e-6 * s4);
    jr_free(p1);
    jr_free(p4);
    /* a global batch: each GPU count's fastest micro-batch x accumulation that fits */
    ck_assert_int_eq(run("plan --hw a100-sxm4-40g --gpus 2,4 --global-batch 512 --steps 5 --policy kk "
                         "--out %D/g.cfg --json %D/g.json"), 0);
    v = load_json("g.json");
    check_doc(v, "plan");
    ck_assert_int_eq(at(v, "config.global_batch")->num, 512);
    const jr_node *plans = at(v, "plans");
    ck_assert_int_eq(plans->n, 2);
    for (int i = 0; i < plans->n; i++) {
        const jr_node *p = plans->kids[i];
        double g = jr_get(p, "gpus")->num, b = jr_get(p, "batch")->num, k = jr_get(p, "accum")->num;
        ck_assert_double_eq(g * b * k, 512);
        ck_assert(b <= 83); /* fits 40 GB */
    }
    jr_free(v);
    ck_assert(exists("g-2x256.cfg") && exists("g-4x128.cfg"));
    /* a deadline: each plan says whether it trains the samples in time */
    ck_assert_int_eq(run("plan --gpus 2,8 --global-batch 64 --steps 5 --train-samples 1e6 --deadline 2 "
                         "--json %D/d.json"), 0);
    v = load_json("d.json");
    check_doc(v, "plan");
    ck_assert_double_eq(at(v, "config.deadline_hours")->num, 2);
    plans = at(v, "plans");
    for (int i = 0; i < plans->n; i++) {
        const jr_node *p = plans->kids[i];
        ck_assert_int_eq(jr_get(p, "meets_deadline")->t, JR_BOOL);
        ck_assert_int_eq((int)jr_get(p, "meets_deadline")->num, jr_get(p, "pred_train_hours")->num <= 2);
    }
    jr_free(v);
    ck_assert_int_eq(run("plan --deadline 2 2> %D/err.txt"), 2); /* no --train-samples */
    /* a budget: each plan says whether it costs at most that */
    ck_assert_int_eq(run("plan --gpus 2,8 --global-batch 64 --steps 5 --train-samples 1e6 --price 2 --budget 1 "
                         "--json %D/b.json"), 0);
    v = load_json("b.json");
    check_doc(v, "plan");
    ck_assert_double_eq(at(v, "config.budget")->num, 1);
    plans = at(v, "plans");
    for (int i = 0; i < plans->n; i++) {
        const jr_node *p = plans->kids[i];
        ck_assert_int_eq(jr_get(p, "within_budget")->t, JR_BOOL);
        ck_assert_int_eq((int)jr_get(p, "within_budget")->num, jr_get(p, "pred_cost")->num <= 1);
    }
    jr_free(v);
    ck_assert_int_eq(run("plan --budget 2 --train-samples 1e6 2> %D/err.txt"), 2); /* no --price */
    /* several hardware specs, each its own price: a plan of each, named by hardware */
    ck_assert_int_eq(run("plan --hw h100-sxm,a100-sxm4-80g --gpus 2 --batch 8 --steps 3 --train-samples 1e6 "
                         "--price 3,2 --out %D/m.cfg --json %D/m.json"), 0);
    v = load_json("m.json");
    check_doc(v, "plan");
    ck_assert_str_eq(at(v, "provenance.hw")->str, "h100-sxm,a100-sxm4-80g");
    ck_assert_int_eq(at(v, "config.price_per_gpu_hour")->t, JR_NULL);
    plans = at(v, "plans");
    ck_assert_int_eq(plans->n, 2);
    static const char *const hw2[2] = {"h100-sxm", "a100-sxm4-80g"};
    for (int i = 0; i < 2; i++) {
        const jr_node *p = plans->kids[i];
        ck_assert_str_eq(jr_get(p, "hw")->str, hw2[i]);
        ck_assert_double_eq(jr_get(p, "price_per_gpu_hour")->num, i ? 2 : 3);
        ck_assert_double_eq_tol(jr_get(p, "pred_cost")->num, (i ? 2 : 3) * jr_get(p, "pred_gpu_hours")->num, 1e-9);
    }
    /* the H100's calibration is measured, the A100's transferred: only the second is an estimate */
    ck_assert_ptr_null(strstr(jr_get(plans->kids[0], "calibration")->str, "estimate"));
    ck_assert_ptr_nonnull(strstr(jr_get(plans->kids[1], "calibration")->str, "estimate"));
    jr_free(v);
    ck_assert(exists("m-h100-sxm-2x8.cfg") && exists("m-a100-sxm4-80g-2x8.cfg"));
    ck_assert_int_eq(run("plan --hw h200-sxm,h100-sxm --calib h200-sxm 2> %D/err.txt"), 2);
    ck_assert_int_eq(run("plan --hw h200-sxm,h100-sxm --price 1,2,3 2> %D/err.txt"), 2);
    ck_assert_int_eq(run("plan --hw h100-sxm,h100-sxm 2> %D/err.txt"), 2);
    ck_assert_int_eq(run("whatif --price 1,2 2> %D/err.txt"), 2);
    ck_assert_int_eq(run("plan --gpus 3 --global-batch 512 2> %D/err.txt"), 2);  /* not a multiple */
    ck_assert_int_eq(run("plan --batch 8 --global-batch 512 2> %D/err.txt"), 2); /* chooses --batch */
    ck_assert_int_eq(run("whatif --accum 0 2> %D/err.txt"), 2);
    /* a price without samples, or a count that is none, is refused before any work */
    ck_assert_int_eq(run("whatif --price 2 --json %D/x.json 2> %D/err.txt"), 2);
    ck_assert(!exists("x.json"));
    ck_assert_int_eq(run("plan --train-samples 2.5Q --out %D/x.cfg 2> %D/err.txt"), 2);
    ck_assert_int_eq(run("predict --train-samples -3 2> %D/err.txt"), 2);
    ck_assert(!exists("x.cfg"));
}
END_TEST

/* `unpad ARGS` exits 1 and its standard error says `says`. */
static void refused_with(const char *args, int rc, const char *says)
{
    char cmd[1024], path[256], *text;
    unpad_err e = {0};
    snprintf(cmd, sizeof cmd, "%s 2> %%D/err.txt", args);
    ck_assert_int_eq(run(cmd), rc);
    snprintf(path, sizeof path, "%s/err.txt", OUTDIR);
    ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
    ck_assert_msg(strstr(text, says), "%s: %s", args, text);
    free(text);
}

/* exit 1 (a refused input) saying `says` on standard error */
static void refused_saying(const char *args, const char *says)
{
    refused_with(args, 1, says);
}

/* Lists, flags and traces that were once taken silently. */
START_TEST(test_refused_before_any_work)
{
    static const char *const refused[] = {
        "whatif --gpus 8,8 --json %D/r.json",          /* a configuration asked twice */
        "whatif --gpus 8,,16 --json %D/r.json",        /* an empty item */
        "whatif --policy kk,kk --json %D/r.json",
        "whatif --layout padded,padded --json %D/r.json",
        "whatif --accum 2,2 --json %D/r.json",
        "predict --padded --layout packed --json %D/r.json", /* --padded is a --layout list */
        "predict --hw %D/hex.cfg --json %D/r.json",    /* a hexadecimal number in a config */
        "whatif --csv %D/no/such/folder.csv --json %D/r.json",
        "plan --steps 5 --out '' --json %D/r.json",       /* an empty file name */
    };
    FILE *f;
    char path[256];
    snprintf(path, sizeof path, "%s/hex.cfg", OUTDIR);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    char hw[512], *text;
    unpad_err e = {0};
    ck_assert_int_eq(unpad_read_file(tu_path(hw, sizeof hw, "models/hw/h200-sxm.cfg"), &text, NULL, &e), UNPAD_OK);
    char *bw = strstr(text, "\nmem_bw_gbs");
    ck_assert_ptr_nonnull(bw);
    *bw = '\0';
    fprintf(f, "%s\nmem_bw_gbs = 0x10\n%s\n", text, strchr(bw + 1, '\n') ? strchr(bw + 1, '\n') + 1 : "");
    fclose(f);
    free(text);
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "%s 2> %%D/err.txt", refused[i]);
        int rc = run(cmd);
        ck_assert_msg(rc == 1 || rc == 2, "%s: exit %d", refused[i], rc);
        ck_assert_msg(!exists("r.json"), "%s wrote its output", refused[i]);
    }
    /* a plan that cannot write its second file writes neither */
    snprintf(path, sizeof path, "%s/z-16x8.cfg", OUTDIR);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    ck_assert_int_eq(run("plan --gpus 8,16 --batch 8 --steps 5 --out %D/z.cfg 2> %D/err.txt"), 1);
    ck_assert(!exists("z-8x8.cfg"));
    /* a plan of several configurations, one of which does not fit: refused before any, naming it */
    refused_saying("plan --hw a100-sxm4-40g --gpus 8 --batch 56,256 --steps 5 --out %D/m.cfg --json %D/r.json",
                   "a100-sxm4-40g, 8 GPUs x 256: 256 sequences per GPU do not fit");
    ck_assert(!exists("m-8x56.cfg") && !exists("m-8x256.cfg") && !exists("r.json"));
    /* a layer the model does not have, a trace given twice, two models in one trace */
    snprintf(path, sizeof path, "%s/t.csv", OUTDIR);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fprintf(f, "%s\nh200-sxm,bert-base,1,0,5,qkv_fwd,12,-1,-1,2,400,100000,300,1e9,1e6,0,12.5\n", TRACE_HEADER);
    fclose(f);
    refused_saying("validate --traces %D/t.csv", "layer 12, but bert-base has 12 layers");
    refused_saying("validate --traces %D/t.csv %D/../$(basename %D)/t.csv", "given twice");
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fprintf(f, "%s\nh200-sxm,bert-base,1,0,5,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,12.5\n"
               "h200-sxm,bert-large,1,0,5,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,12.5\n", TRACE_HEADER);
    fclose(f);
    refused_saying("validate --traces %D/t.csv", "mixed models in one trace: row 2");
    /* an unknown flag or one without its value: named under the command's name, exit 2 */
    refused_with("predict --bogus --json %D/r.json", 2, "unpad predict: unknown or ambiguous option '--bogus'");
    refused_with("whatif --json %D/r.json --batch", 2, "unpad whatif: --batch needs a value");
    refused_with("plan -x --json %D/r.json", 2, "unpad plan: unknown option '-x'");
    refused_with("predict --padded=3 --json %D/r.json", 2, "unpad predict: '--padded=3': the flag takes no value");
    ck_assert(!exists("r.json"));
    ck_assert_int_eq(run("predict -h"), 0);
    /* a flag of one value given twice: refused, naming both values; a list flag collects */
    refused_with("predict --batch 4 --batch 8 --json %D/r.json", 2, "--batch given twice ('4', then '8')");
    refused_with("whatif --gpus 8 --gpus 16 --json %D/r.json", 2, "--gpus given twice");
    ck_assert(!exists("r.json"));
    ck_assert_int_eq(run("predict --padded --padded --steps 3 --json %D/r.json > /dev/null"), 0);
}
END_TEST

/* Lengths over the model's max_len: refused (naming --max-len) unless a cap truncates them; with one,
 * predict, whatif and plan run on the truncated lengths, and predict adds no uncapped layout. */
START_TEST(test_max_len_truncates_long_lengths)
{
    put_file("long.csv", "length,count\n100,5\n300,3\n600,2\n");
    refused_saying("predict --dist %D/long.csv --steps 2", "--max-len");
    ck_assert_int_eq(run("predict --dist %D/long.csv --max-len 256 --batch 8 --steps 4 --quiet --json %D/p.json"),
                     0);
    jr_node *v = load_json("p.json");
    check_doc(v, "predict");
    ck_assert_int_eq(at(v, "config.max_len")->num, 256);
    ck_assert_int_eq(at(v, "layouts")->n, 1);
    ck_assert_int_eq(jr_get(at(v, "layouts")->kids[0], "max_len")->num, 256);
    jr_free(v);
    ck_assert_int_eq(run("whatif --dist %D/long.csv --max-len 256 --gpus 2 --batch 4 --steps 5 --quiet "
                         "--layout unpadded,buckets=128/256 --json %D/w.json"), 0);
    v = load_json("w.json");
    check_doc(v, "whatif");
    jr_free(v);
    ck_assert_int_eq(run("plan --dist %D/long.csv --max-len 256 --gpus 2 --batch 4 --steps 5 --quiet "
                         "--json %D/plan.json"), 0);
    v = load_json("plan.json");
    check_doc(v, "plan");
    jr_free(v);
    /* a cap the model cannot train */
    refused_saying("predict --dist %D/long.csv --max-len 600 --steps 2", "--max-len 600");
}
END_TEST

/* predict: a buckets layout draws each step's batch from one bucket, so its figures of the sampled batch are
 * left out beside another layout's (text: "-", JSON: null), and the means compare them. */
START_TEST(test_predict_buckets_batch)
{
    ck_assert_int_eq(run("predict --max-len 256 --batch 16 --steps 6 --quiet --layout unpadded,buckets=128/256,padded "
                         "--json %D/b.json"), 0);
    jr_node *v = load_json("b.json");
    check_doc(v, "predict");
    const jr_node *lays = at(v, "layouts");
    ck_assert_int_eq(lays->n, 4); /* and the uncapped unpadded batch */
    ck_assert_str_eq(jr_get(lays->kids[1], "layout")->str, "buckets=128/256");
    ck_assert_int_eq(jr_get(lays->kids[1], "sampled_step_us")->t, JR_NULL);
    ck_assert_int_eq(jr_get(lays->kids[1], "sampled_tokens")->t, JR_NULL);
    ck_assert_int_eq(jr_get(lays->kids[1], "step_us")->t, JR_NUM);
    ck_assert_int_eq(jr_get(lays->kids[2], "sampled_step_us")->t, JR_NUM);
    ck_assert_int_eq(jr_get(lays->kids[3], "sampled_step_us")->t, JR_NUM);
    ck_assert_int_eq(at(v, "sampled_batch.padded_step_us")->t, JR_NUM);
    jr_free(v);
    char *text = slurp("stdout.txt"), *row = strstr(text, "\ntokens computed, the sampled batch");
    ck_assert_ptr_nonnull(strstr(text, "from one bucket, not this batch"));
    ck_assert_ptr_nonnull(row);
    double t0, t2, t3;
    char dash[8];
    ck_assert_int_eq(sscanf(row + 1, "tokens computed, the sampled batch %lf %7s %lf %lf", &t0, dash, &t2, &t3), 4);
    ck_assert_str_eq(dash, "-");
    free(text);
    /* a buckets layout first: the batch is one bucket's, the others' figures left out */
    ck_assert_int_eq(run("predict --batch 16 --steps 4 --quiet --layout buckets=128/256/384/512,padded "
                         "--json %D/c.json"), 0);
    v = load_json("c.json");
    check_doc(v, "predict");
    ck_assert_int_eq(jr_get(at(v, "layouts")->kids[1], "sampled_step_us")->t, JR_NULL);
    ck_assert_int_eq(at(v, "sampled_batch.padded_step_us")->t, JR_NULL);
    ck_assert_int_eq(at(v, "expected.padded_step_us")->t, JR_NUM);
    jr_free(v);
    text = slurp("stdout.txt");
    ck_assert_ptr_nonnull(strstr(text, "the sampled batch (seed 1, from one bucket)"));
    free(text);
}
END_TEST

/* plan --layout: the other layouts beside the trainer's unpadded row, which is shown once even when the
 * list names it. */
START_TEST(test_plan_layouts_unpadded_once)
{
    ck_assert_int_eq(run("plan --gpus 2 --batch 4 --steps 5 --quiet --layout unpadded,padded"), 0);
    char *text = slurp("stdout.txt"), *other = strstr(text, "in other length layouts");
    ck_assert_ptr_nonnull(other);
    int unpadded = 0;
    for (char *p = other; (p = strstr(p, " unpadded ")); p++)
        unpadded++;
    ck_assert_int_eq(unpadded, 1);
    ck_assert_ptr_nonnull(strstr(other, " padded "));
    free(text);
    /* unpadded alone: nothing beside the candidates */
    ck_assert_int_eq(run("plan --gpus 2 --batch 4 --steps 5 --quiet --layout unpadded"), 0);
    text = slurp("stdout.txt");
    ck_assert_ptr_null(strstr(text, "in other length layouts"));
    free(text);
}
END_TEST

START_TEST(test_whatif)
{
    ck_assert_int_eq(run("whatif --gpus 2,4 --batch 4 --steps 12 --policy none,kk --count "
                         "equal,free --attn-steps 2 --quiet --json %D/w.json --csv %D/w.csv"), 0);
    jr_node *v = load_json("w.json");
    check_doc(v, "whatif");
    const jr_node *rows = at(v, "rows");
    /* none once (its count cannot matter), kk equal and free: 3 rows per GPU count */
    ck_assert_int_eq(rows->n, 6);
    ck_assert_str_eq(jr_get(rows->kids[0], "policy")->str, "none");
    ck_assert_str_eq(jr_get(rows->kids[0], "count")->str, "equal");
    ck_assert_str_eq(jr_get(rows->kids[2], "count")->str, "free");
    ck_assert_int_eq(jr_get(rows->kids[3], "gpus")->num, 4);
    ck_assert_int_eq(jr_get(rows->kids[1], "attn_us")->t, JR_NUM);
    ck_assert(at(v, "complete")->num == 1);
    jr_free(v);
    /* the final files only; the CSV ends with its completion line and starts with provenance */
    ck_assert(!exists("w.csv.partial") && !exists("w.json.partial"));
    char path[256], *text;
    unpad_err e = {0};
    snprintf(path, sizeof path, "%s/w.csv", OUTDIR);
    ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
    ck_assert_int_eq(strncmp(text, "# unpad: ", 9), 0);
    ck_assert_ptr_nonnull(strstr(text, "\n# model: bert-large ("));
    ck_assert_ptr_nonnull(strstr(text, "\n# complete: 6 configurations\n"));
    free(text);
    /* attention not timed: null in the JSON, empty cells in the CSV */
    ck_assert_int_eq(run("whatif --gpus 2 --batch 4 --steps 5 --policy lpt --attn-steps 0 "
                         "--json %D/x.json --csv %D/x.csv"), 0);
    v = load_json("x.json");
    check_doc(v, "whatif");
    ck_assert_int_eq(jr_get(at(v, "rows")->kids[0], "attn_us")->t, JR_NULL);
    jr_free(v);
    snprintf(path, sizeof path, "%s/x.csv", OUTDIR);
    ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
    ck_assert_ptr_nonnull(strstr(text, ",,,1,1,none,unpadded,"));
    free(text);
    /* without --steps a configuration of 512 x 56 sequences samples 293 steps (2^23 sequences), the
     * title says so; with --steps it samples what was asked */
    ck_assert_int_eq(run("whatif --gpus 2,512 --batch 56 --policy kk --attn-steps 1 --json %D/b.json"), 0);
    text = slurp("stdout.txt");
    ck_assert_ptr_nonnull(strstr(text, "sequences; --steps K samples K each): 512 GPUs x 56: 293\n"));
    free(text);
    v = load_json("b.json");
    ck_assert_int_eq(at(v, "config.steps")->num, 1000);
    ck_assert_int_eq(at(v, "config.sequence_budget")->num, 8388608);
    ck_assert_int_eq(jr_get(at(v, "rows")->kids[0], "steps")->num, 1000);
    ck_assert_int_eq(jr_get(at(v, "rows")->kids[1], "steps")->num, 293);
    jr_free(v);
    ck_assert_int_eq(run("whatif --gpus 512 --batch 56 --policy kk --attn-steps 1 --steps 20 --json %D/b.json"), 0);
    text = slurp("stdout.txt");
    ck_assert_ptr_null(strstr(text, "sampled steps:"));
    free(text);
    v = load_json("b.json");
    ck_assert_int_eq(at(v, "config.sequence_budget")->t, JR_NULL);
    ck_assert_int_eq(jr_get(at(v, "rows")->kids[0], "steps")->num, 20);
    jr_free(v);
    /* --hw-set: the spec's numbers for a what-if (8 GPUs in nodes of 4: two nodes), said in the
     * provenance; a name, an unknown key or a value out of range refused */
    ck_assert_int_eq(run("whatif --gpus 8 --policy kk --steps 5 --attn-steps 0 --hw-set gpus_per_node=4,node_bw_gbs=25 "
                         "--json %D/h.json"), 0);
    text = slurp("stdout.txt");
    ck_assert_ptr_nonnull(strstr(text, "what-if: --hw-set gpus_per_node=4,node_bw_gbs=25"));
    free(text);
    v = load_json("h.json");
    check_doc(v, "whatif");
    ck_assert_int_eq(jr_get(at(v, "rows")->kids[0], "nodes")->num, 2);
    ck_assert_str_eq(at(v, "provenance.hw_set")->str, "gpus_per_node=4,node_bw_gbs=25");
    jr_free(v);
    ck_assert_int_eq(run("whatif --gpus 8 --steps 5 --hw-set name=x 2> %D/err.txt"), 1);
    text = slurp("err.txt");
    ck_assert_ptr_nonnull(strstr(text, "--hw-set: name names the spec"));
    free(text);
    ck_assert_int_eq(run("predict --steps 2 --hw-set gpus_per_node=0 2> %D/err.txt"), 1);
    text = slurp("err.txt");
    ck_assert_ptr_nonnull(strstr(text, "gpus_per_node = 0 is out of range"));
    free(text);
    ck_assert_int_eq(run("predict --steps 2 --hw-set link_bw=3 2> %D/err.txt"), 1);
    text = slurp("err.txt");
    ck_assert_ptr_nonnull(strstr(text, "unknown key 'link_bw'"));
    free(text);
    /* --graphs on: the trainer's CUDA graphs, said in the provenance. The default calibration has no
     * graph coefficients: an estimate without the host's wait, so no slower; one that has them is
     * "on"; a value other than on or off is refused */
    ck_assert_int_eq(run("whatif --gpus 8 --policy kk --steps 20 --attn-steps 0 --batch 8 --json %D/g0.json"), 0);
    ck_assert_int_eq(run("whatif --gpus 8 --policy kk --steps 20 --attn-steps 0 --batch 8 --graphs on "
                         "--json %D/g1.json"), 0);
    text = slurp("stdout.txt");
    ck_assert_ptr_nonnull(strstr(text, "CUDA graphs (the trainer's --graphs on): on (an estimate"));
    ck_assert_ptr_nonnull(strstr(text, "graphs on several GPUs only with --bucket-mb 0"));
    free(text);
    jr_node *g0 = load_json("g0.json"), *g1 = load_json("g1.json");
    check_doc(g1, "whatif");
    ck_assert_int_eq(at(g0, "provenance.graphs")->t, JR_NULL);
    ck_assert_ptr_nonnull(strstr(at(g1, "provenance.graphs")->str, "an estimate"));
    double t0 = jr_get(at(g0, "rows")->kids[0], "step_us")->num, t1 = jr_get(at(g1, "rows")->kids[0], "step_us")->num;
    ck_assert_msg(t1 <= t0 && t1 > 0.8 * t0, "%g %g", t1, t0);
    jr_free(g0);
    ck_assert_int_eq(run("predict --steps 3 --graphs on --calib %D/graphs.cfg 2> %D/err.txt"), 1); /* none yet */
    {
        char src[512], dst[256], *cal = NULL;
        unpad_err re = {0};
        ck_assert_int_eq(unpad_read_file(tu_path(src, sizeof src, "models/calib/h200-sxm.cfg"), &cal, NULL, &re), 0);
        snprintf(dst, sizeof dst, "%s/graphs.cfg", OUTDIR);
        FILE *f = fopen(dst, "w");
        ck_assert_ptr_nonnull(f);
        for (char *line = strtok(cal, "\n"); line; line = strtok(NULL, "\n")) /* the file's graph keys replaced */
            if (strncmp(line, "graph_launch_us", 15) && strncmp(line, "graph_step_overhead_us", 22))
                fprintf(f, "%s\n", line);
        fprintf(f, "graph_launch_us = 0.5\ngraph_step_overhead_us = 10\n");
        fclose(f);
        free(cal);
    }
    ck_assert_int_eq(run("whatif --gpus 8 --policy kk --steps 20 --attn-steps 0 --batch 8 --graphs on "
                         "--calib %D/graphs.cfg --json %D/g2.json"), 0);
    jr_node *g2 = load_json("g2.json");
    ck_assert_str_eq(at(g2, "provenance.graphs")->str, "on");
    ck_assert(jr_get(at(g2, "rows")->kids[0], "step_us")->num < t1); /* 0.5 us a launch, 10 us a step */
    jr_free(g1);
    jr_free(g2);
    ck_assert_int_eq(run("predict --steps 2 --graphs maybe 2> %D/err.txt"), 2);
    /* list items may be ranges: times K, plus K, every integer; values past B are not made */
    ck_assert_int_eq(run("whatif --gpus 8..40x2 --batch 16..40+16 --policy kk --steps 2 --attn-steps 0 "
                         "--json %D/r.json"), 0);
    v = load_json("r.json");
    const jr_node *rr = at(v, "rows");
    ck_assert_int_eq(rr->n, 6); /* gpus 8, 16, 32 x batch 16, 32 */
    ck_assert_int_eq(jr_get(rr->kids[0], "gpus")->num, 8);
    ck_assert_int_eq(jr_get(rr->kids[0], "batch")->num, 16);
    ck_assert_int_eq(jr_get(rr->kids[5], "gpus")->num, 32);
    ck_assert_int_eq(jr_get(rr->kids[5], "batch")->num, 32);
    jr_free(v);
    static const char *const bad[][2] = {
        {"--gpus 4..2", "bad range '4..2'"}, {"--gpus 0..4", "bad range '0..4'"},
        {"--gpus 8..64x1", "bad step '1'"}, {"--batch 8..16+0", "bad step '0'"},
        {"--gpus 1..5000", "makes more than 4096 values"}, {"--gpus 8,8..16", "asked twice"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "whatif %s --steps 1 2> %%D/err.txt", bad[i][0]);
        ck_assert_int_eq(run(cmd), 2); /* a bad flag: exit 2, as every flag's */
        text = slurp("err.txt");
        ck_assert_msg(strstr(text, bad[i][1]) != NULL, "%s: %s", bad[i][0], text);
        free(text);
    }
}
END_TEST

/* --fp8 on: the trainer's memory with FP8 products in predict, whatif and plan; refused where the
 * hardware has no FP8 tensor cores, and for a value other than on or off. */
START_TEST(test_fp8_memory)
{
    ck_assert_int_eq(run("predict --steps 2 --json %D/p0.json"), 0);
    ck_assert_int_eq(run("predict --steps 2 --fp8 on --json %D/p1.json"), 0);
    jr_node *p0 = load_json("p0.json"), *p1 = load_json("p1.json");
    check_doc(p1, "predict");
    ck_assert(at(p0, "config.fp8")->num == 0 && at(p1, "config.fp8")->num == 1);
    ck_assert(at(p0, "memory.fp8_gib")->num == 0);
    /* bert-large at 56 Wikipedia lengths: activations for 56 x 255.8 + 5 sqrt(56) x 182.7 -> 21,248
     * tokens; 0.5626 GiB of FP8 weight copies and scales, and the operand buffer of T x 4096 bytes */
    double add = at(p1, "memory.fp8_gib")->num, T = at(p1, "memory.tokens")->num, gib = 1073741824.0;
    ck_assert_msg(T == at(p0, "memory.tokens")->num && T == 21248, "%.0f", T);
    ck_assert_msg(fabs(add - (0.5626 + T * 4096 / gib)) < 0.001, "%.4f", add);
    /* and FFN1's output in one byte an element: 24 layers x T tokens x 4096 bytes less */
    ck_assert_double_eq_tol(at(p1, "memory.gib")->num - at(p0, "memory.gib")->num, add - 24 * T * 4096 / gib, 1e-9);
    /* the project's H200 FP8 calibration gives the default --fp8 on its step times */
    ck_assert(at(p0, "config.fp8_step_times")->num == 0 && at(p1, "config.fp8_step_times")->num == 1);
    ck_assert_double_lt(at(p1, "expected.step_us")->num, at(p0, "expected.step_us")->num);
    jr_free(p1);
    /* with the bf16 calibration, the step times are the bf16 products' */
    ck_assert_int_eq(run("predict --steps 2 --fp8 on --calib h200-sxm --json %D/p1.json"), 0);
    p1 = load_json("p1.json");
    ck_assert(at(p1, "config.fp8_step_times")->num == 0);
    ck_assert_double_eq_tol(at(p1, "expected.step_us")->num, at(p0, "expected.step_us")->num, 1e-12);
    jr_free(p1);
    /* an FP8 calibration (fp8 = true: fitted on --fp8 on traces) times the encoder's Linear
     * forwards and data gradients at the FP8 peak: the same coefficients give a shorter step, by
     * less than the GEMMs' whole share */
    char cal[512], cmd[1400];
    tu_path(cal, sizeof cal, "models/calib/h200-sxm.cfg");
    snprintf(cmd, sizeof cmd, "(grep -v '^fp8 =' '%s'; echo 'fp8 = true') > '%s/f8.cfg'", cal, OUTDIR);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(run("predict --steps 2 --fp8 on --calib %D/f8.cfg --json %D/p2.json"), 0);
    jr_node *p2 = load_json("p2.json");
    check_doc(p2, "predict");
    ck_assert(at(p2, "config.fp8_step_times")->num == 1);
    double r = at(p2, "expected.step_us")->num / at(p0, "expected.step_us")->num;
    ck_assert_msg(r > 0.6 && r < 0.95, "FP8 / bf16 step %.3f", r);
    jr_free(p2);
    jr_free(p0);
    refused_saying("predict --steps 2 --calib %D/f8.cfg --json %D/r.json",
                   "f8.cfg: fitted on traces of unpad-train --fp8 on (fp8 = true): pass --fp8 on");
    /* the committed FP8 held-out runs: validated against the FP8 calibration (its memory too), and
     * refused against the bf16 one, naming a log that says --fp8 on */
    ck_assert_int_eq(run("validate --fp8 on --workloads traces/fp8/workloads-heldout-fp8.csv --steps 50 --quiet "
                         "--json %D/v8.json"), 0);
    jr_node *v8 = load_json("v8.json");
    ck_assert_int_eq((int)at(v8, "summary.workloads")->num, 20);
    ck_assert_int_eq((int)at(v8, "summary.step_logs")->num, 20);
    ck_assert_msg(at(v8, "summary.memory_max_abs_pct")->num < 1, "%.2f", at(v8, "summary.memory_max_abs_pct")->num);
    jr_free(v8);
    refused_saying("validate --workloads traces/fp8/workloads-heldout-fp8.csv --steps 50 --quiet --json %D/r.json",
                   ".log:1: workload heldout-w-fp8-bert-base-b24-short ran with --fp8 on, but the calibration "
                   "describes bf16 products: pass --fp8 on");
    ck_assert_int_eq(run("whatif --gpus 1 --batch 56 --policy none --steps 3 --attn-steps 0 --fp8 on --quiet "
                         "--last-layer all --json %D/w.json"), 0);
    jr_node *w = load_json("w.json");
    check_doc(w, "whatif");
    ck_assert(at(w, "config.fp8")->num == 1);
    /* the trainer's activations for 21,248 tokens (26.42 GiB for 56 x 512, measured with every layer on
     * all tokens, docs/memory.md) */
    ck_assert_msg(fabs(jr_get(at(w, "rows")->kids[0], "memory_gib")->num - 21.42) < 0.01, "%.3f",
                  jr_get(at(w, "rows")->kids[0], "memory_gib")->num);
    jr_free(w);
    ck_assert_int_eq(run("plan --gpus 8 --batch 56 --steps 3 --fp8 on --hw h100-sxm --quiet --json %D/pl.json"), 0);
    jr_node *pl = load_json("pl.json");
    check_doc(pl, "plan");
    ck_assert(at(pl, "config.fp8")->num == 1);
    jr_free(pl);
    refused_saying("whatif --fp8 on --hw a100-sxm4-40g --steps 2 --json %D/r.json",
                   "--fp8 on: a100-sxm4-40g has no FP8 tensor cores");
    refused_saying("plan --fp8 on --hw h100-sxm,a100-sxm4-80g --steps 2 --json %D/r.json",
                   "a100-sxm4-80g has no FP8 tensor cores");
    refused_with("predict --fp8 yes --json %D/r.json", 2, "--fp8: unknown 'yes' (expected on or off)");
    ck_assert(!exists("r.json"));
}
END_TEST

/* A sweep's .partial files are checked like its outputs: never an input, never another output. */
START_TEST(test_whatif_partial_names)
{
    char dist[512], cmd[1200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/q.csv.partial'", tu_path(dist, sizeof dist, "models/dists/short.csv"),
             OUTDIR);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_ne(run("whatif --gpus 2 --batch 4 --steps 2 --policy kk --attn-steps 0 --quiet "
                         "--dist %D/q.csv.partial --csv %D/q.csv"), 0);
    ck_assert(exists("q.csv.partial") && !exists("q.csv"));
    ck_assert_int_ne(run("whatif --gpus 2 --batch 4 --steps 2 --policy kk --attn-steps 0 --quiet "
                         "--csv %D/b --json %D/b.partial"), 0);
    ck_assert(!exists("b") && !exists("b.partial"));
    ck_assert_int_ne(run("whatif --gpus 2 --batch 4 --steps 2 --policy kk --attn-steps 0 --quiet "
                         "--csv %D/c.partial --json %D/c"), 0);
    ck_assert(!exists("c") && !exists("c.partial"));
}
END_TEST

/* --out names a prefix: a folder ("dir/") once got the hidden files dir/.png, .svg and .csv. */
/* --last-layer heads|all: the trainer's last layer after its attention on the heads' rows (the
 * default) or on every token; a shorter step with heads, said in the JSON and the title; a word
 * other than those refused, naming the flag, on every command that takes it. */
START_TEST(test_last_layer)
{
    ck_assert_int_eq(run("predict --batch 16 --steps 3 --json %D/h.json"), 0);
    char *text = slurp("stdout.txt");
    ck_assert_msg(strstr(text, "the last layer after its attention on the heads' rows (--last-layer heads)"), "%s",
                  text);
    free(text);
    ck_assert_int_eq(run("predict --batch 16 --steps 3 --last-layer heads --json %D/h2.json"), 0);
    ck_assert_int_eq(run("predict --batch 16 --steps 3 --last-layer all --json %D/a.json"), 0);
    text = slurp("stdout.txt");
    ck_assert_msg(strstr(text, "every layer on all tokens (--last-layer all)"), "%s", text);
    free(text);
    jr_node *h = load_json("h.json"), *h2 = load_json("h2.json"), *a = load_json("a.json");
    check_doc(a, "predict");
    ck_assert_str_eq(at(h, "config.last_layer")->str, "heads");
    ck_assert_str_eq(at(a, "config.last_layer")->str, "all");
    double th = at(h, "expected.step_us")->num, ta = at(a, "expected.step_us")->num;
    ck_assert_double_eq(at(h2, "expected.step_us")->num, th);
    /* BERT-Large: the last of 24 layers after its attention is about 2.5% of the step, and it
     * keeps about a sixth of its rows */
    ck_assert_msg(th < ta && th > 0.95 * ta, "heads %.1f us, all %.1f us", th, ta);
    jr_free(h);
    jr_free(h2);
    jr_free(a);
    ck_assert_int_eq(run("whatif --gpus 2 --batch 16 --policy kk --steps 3 --attn-steps 0 --last-layer all --quiet "
                         "--json %D/w.json"), 0);
    jr_node *w = load_json("w.json");
    check_doc(w, "whatif");
    ck_assert_str_eq(at(w, "config.last_layer")->str, "all");
    double wa = jr_get(at(w, "rows")->kids[0], "step_us")->num;
    jr_free(w);
    ck_assert_int_eq(run("whatif --gpus 2 --batch 16 --policy kk --steps 3 --attn-steps 0 --quiet "
                         "--json %D/w.json"), 0);
    w = load_json("w.json");
    ck_assert_str_eq(at(w, "config.last_layer")->str, "heads");
    ck_assert_double_lt(jr_get(at(w, "rows")->kids[0], "step_us")->num, wa);
    jr_free(w);
    ck_assert_int_eq(run("datamove --batch 2 --seq 64 --last-layer all --json %D/d.json"), 0);
    jr_node *d = load_json("d.json");
    check_doc(d, "datamove");
    ck_assert_str_eq(at(d, "config.last_layer")->str, "all");
    double da = at(d, "total.flops")->num;
    jr_free(d);
    ck_assert_int_eq(run("datamove --batch 2 --seq 64 --json %D/d.json"), 0);
    d = load_json("d.json");
    ck_assert_double_lt(at(d, "total.flops")->num, da);
    jr_free(d);
    ck_assert_int_eq(run("plan --gpus 2 --batch 16 --steps 3 --last-layer all --quiet --json %D/p.json"), 0);
    jr_node *p = load_json("p.json");
    check_doc(p, "plan");
    ck_assert_str_eq(at(p, "config.last_layer")->str, "all");
    jr_free(p);
    static const char *const cmds[] = {"predict", "whatif", "plan", "datamove", "plot load"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[256], says[256];
        int plot = !strncmp(cmds[i], "plot", 4);
        snprintf(args, sizeof args, "%s --last-layer bogus%s", cmds[i], plot ? "" : " --json %D/r.json");
        snprintf(says, sizeof says, "unpad %.*s: --last-layer: unknown 'bogus' (expected heads or all)",
                 (int)strcspn(cmds[i], " "), cmds[i]);
        refused_with(args, 2, says);
        ck_assert(!exists("r.json"));
    }
    refused_with("plot groups --last-layer all --out %D/g", 2, "unpad plot groups: --last-layer is for the load plot");
    ck_assert(!exists("g.png"));
}
END_TEST

START_TEST(test_plot_out_is_a_prefix)
{
    ck_assert_int_ne(run("plot hist --dist short --out %D/"), 0);
    ck_assert(!exists(".png") && !exists(".svg") && !exists(".csv"));
    ck_assert_int_ne(run("plot hist --dist short --out ''"), 0);
    /* a folder without the kind's gnuplot script: refused before any file is written */
    ck_assert_int_eq(run("plot load --plots %D/no-such-folder --out %D/l 2> %D/err.txt"), 1);
    ck_assert(!exists("l.csv") && !exists("l-gpus.csv"));
    /* a picture or data name plot does not write: refused, not x.pdf.png */
    ck_assert_int_ne(run("plot hist --dist short --out %D/x.pdf"), 0);
    ck_assert(!exists("x.pdf.png") && !exists("x.pdf.svg") && !exists("x.pdf.csv") && !exists("x.png"));
    /* a prefix named like the picture is the picture's name, not x.png.png */
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        ck_assert_int_eq(run("plot hist --dist short --out %D/h.png"), 0);
        ck_assert(exists("h.png") && exists("h.svg") && exists("h.csv"));
        ck_assert(!exists("h.png.png") && !exists("h.png.csv"));
        /* a script gnuplot cannot run: the plot fails and leaves none of its files */
        char dir[256];
        snprintf(dir, sizeof dir, "%s/badplots", OUTDIR);
        ck_assert_int_eq(mkdir(dir, 0755), 0);
        put_file("badplots/load.gp", "plot garbage(((\n");
        ck_assert_int_eq(run("plot load --plots %D/badplots --out %D/bad 2> %D/err.txt"), 1);
        ck_assert(!exists("bad.csv") && !exists("bad-gpus.csv") && !exists("bad.png") && !exists("bad.svg"));
    } else {
        printf("check_cli: plot --out h.png not drawn: gnuplot missing\n");
    }
}
END_TEST

START_TEST(test_plan_validate)
{
    ck_assert_int_eq(run("plan --gpus 2,3 --batch 4 --steps 10 --quiet --out %D/plan.cfg "
                         "--json %D/plan.json"), 0);
    jr_node *v = load_json("plan.json");
    check_doc(v, "plan");
    const jr_node *plans = at(v, "plans");
    ck_assert_int_eq(plans->n, 2);
    ck_assert_ptr_nonnull(strstr(jr_get(plans->kids[1], "file")->str, "/plan-3x4.cfg"));
    ck_assert_int_eq(jr_get(plans->kids[0], "candidates")->n, 5);
    jr_free(v);
    ck_assert(exists("plan-2x4.cfg") && exists("plan-3x4.cfg") && !exists("plan.cfg"));

    char traces[512];
    tu_path(traces, sizeof traces, "tests/data/synthetic-heldout-bert-base.csv");
    char args[1024];
    snprintf(args, sizeof args, "validate --traces '%s' --json %%D/v.json", traces);
    ck_assert_int_eq(run(args), 0);
    v = load_json("v.json");
    check_doc(v, "validate");
    ck_assert_int_eq(at(v, "runs")->n, 1);
    ck_assert_int_gt(at(v, "summary.rows.n")->num, 100);
    ck_assert_str_eq(at(v, "provenance.model")->str, "bert-base");
    jr_free(v);
    /* --json -: standard output holds the document and nothing else */
    snprintf(args, sizeof args, "validate --traces '%s' --json -", traces);
    ck_assert_int_eq(run(args), 0);
    v = load_json("stdout.txt");
    check_doc(v, "validate");
    jr_free(v);
}
END_TEST

/* validate --workloads --json: the table's rows and summary; without trainer logs the per-step
 * keys are null; flags of the other mode are refused. */
START_TEST(test_validate_workloads_json)
{
    char path[256];
    snprintf(path, sizeof path, "%s/w.csv", OUTDIR);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "workload,model,batch,vranks,policy,dist,steps,step_ms_median,step_ms_mean,mem_gib,trace\n"
               "w-a,bert-base,16,1,none,wiki512,30,9.0,9.1,5.0,w-a.csv\n"
               "w-b,bert-large,8,2,kk,wiki128,30,9.0,9.3,7.0,w-b.csv\n");
    fclose(f);
    ck_assert_int_eq(run("validate --workloads %D/w.csv --steps 100 --quiet --json -"), 0);
    jr_node *v = load_json("stdout.txt");
    check_doc_as(v, "validate --workloads", "validate");
    ck_assert_int_eq(at(v, "summary.workloads")->num, 2);
    ck_assert_int_eq(at(v, "summary.step_logs")->num, 0);
    ck_assert_int_eq(at(v, "summary.per_step_max_abs_pct")->t, JR_NULL);
    const jr_node *w = at(v, "workloads");
    ck_assert_int_eq(w->n, 2);
    ck_assert_str_eq(jr_get(w->kids[1], "policy")->str, "kk");
    ck_assert_int_eq(jr_get(w->kids[1], "virtual_ranks")->num, 2);
    ck_assert_double_eq(jr_get(w->kids[0], "measured_step_ms")->num, 9.1);
    ck_assert_int_eq(jr_get(w->kids[0], "stalls")->t, JR_NULL);
    double m = jr_get(w->kids[0], "measured_step_ms")->num, p = jr_get(w->kids[0], "whatif_step_ms")->num;
    ck_assert_double_eq_tol(jr_get(w->kids[0], "whatif_error_pct")->num, 100 * (p - m) / m, 1e-9);
    ck_assert_int_eq(at(v, "provenance.seed")->num, 21);
    ck_assert_int_eq(at(v, "provenance.model")->t, JR_NULL);
    jr_free(v);
    /* the other mode's flags, and both modes at once, are refused before any work */
    ck_assert_int_eq(run("validate --workloads %D/w.csv --model bert-base 2>/dev/null"), 2);
    ck_assert_int_eq(run("validate --workloads %D/w.csv --traces %D/w.csv 2>/dev/null"), 2);
    /* --csv and --plot: per logged step; with no trainer log there are none, which is an error, no
     * file */
    ck_assert_int_eq(run("validate --workloads %D/w.csv --steps 100 --quiet --csv %D/x.csv 2>%D/err.txt"), 1);
    ck_assert(!exists("x.csv"));
    char *text = slurp("err.txt");
    ck_assert_msg(strstr(text, "no trainer log") && strstr(text, "w.csv"), "%s", text);
    free(text);
    ck_assert_int_eq(run("validate --workloads %D/w.csv --steps 100 --quiet --plot %D/x.png 2>%D/err.txt"), 1);
    ck_assert(!exists("x.png"));
    text = slurp("err.txt");
    ck_assert_msg(strstr(text, "--plot has no steps to draw"), "%s", text);
    free(text);
    snprintf(path, sizeof path, "%s/logs", OUTDIR);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/logs/w-a.log", OUTDIR);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "step      9/40 | loss 11.1 | 100.0 samples/s | 9.25 ms/step | ETA 1s\n"
               "step     10/40 | loss 11.1 | 100.0 samples/s | 9.50 ms/step | ETA 1s\n");
    fclose(f);
    ck_assert_int_eq(run("validate --workloads %D/w.csv --steps 100 --quiet --csv %D/x.csv"), 0);
    text = slurp("x.csv");
    ck_assert_msg(strstr(text, "\nworkload,step,seqs,tokens,sum_len2,max_len,measured_ms,predicted_ms,err_pct\n"
                               "w-a,9,16,") && strstr(text, ",9.2500,") && strstr(text, "\nw-a,10,16,") &&
                      !strstr(text, "w-b,"), "%s", text);
    free(text);
    /* the plot of those steps (gnuplot, where it is installed: the PNG signature) */
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        ck_assert_int_eq(run("validate --workloads %D/w.csv --steps 100 --quiet --plot %D/x.png"), 0);
        text = slurp("x.png");
        ck_assert(memcmp(text, "\x89PNG", 4) == 0);
        free(text);
        /* the format is the extension's: SVG for .svg; an unknown one refused before any work */
        ck_assert_int_eq(run("validate --workloads %D/w.csv --steps 100 --quiet --plot %D/x.svg"), 0);
        text = slurp("x.svg");
        ck_assert_msg(!strncmp(text, "<?xml", 5) && strstr(text, "<svg"), "%.100s", text);
        free(text);
        ck_assert_int_eq(run("validate --workloads %D/w.csv --steps 100 --quiet --plot %D/x.jpg 2>%D/err.txt"), 2);
        ck_assert(!exists("x.jpg"));
        text = slurp("err.txt");
        ck_assert_msg(strstr(text, "x.jpg: the extension gives the image's format: .png, .svg or .pdf"), "%s", text);
        free(text);
    } else {
        printf("check_cli: validate --workloads --plot not drawn: gnuplot missing\n");
    }
    remove(path);
    snprintf(path, sizeof path, "%s/logs", OUTDIR);
    rmdir(path);
}
END_TEST

/* calibrate --workloads: only beside --traces; a table whose trainer logs are missing is refused
 * naming the log, and nothing is written. */
START_TEST(test_calibrate_workloads)
{
    char trace[512], args[2048];
    tu_path(trace, sizeof trace, "tests/data/synthetic-calib-bert-base.csv");
    ck_assert_int_eq(run("calibrate --workloads %D/none.csv 2>/dev/null"), 2);
    char path[256];
    snprintf(path, sizeof path, "%s/cw.csv", OUTDIR);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "workload,model,batch,vranks,policy,dist,steps,step_ms_median,step_ms_mean,mem_gib,trace\n"
               "cw-a,bert-base,16,1,none,wiki512,20,9.0,9.1,5.0,cw-a.csv\n");
    fclose(f);
    snprintf(args, sizeof args, "calibrate --traces '%s' --workloads %%D/cw.csv --out %%D/cw.cfg 2>%%D/err.txt",
             trace);
    ck_assert_int_eq(run(args), 1);
    char *text;
    unpad_err e = {0};
    snprintf(path, sizeof path, "%s/err.txt", OUTDIR);
    ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
    ck_assert_msg(strstr(text, "logs/cw-a.log") && strstr(text, "workload cw-a"), "%s", text);
    free(text);
    ck_assert(!exists("cw.cfg"));
}
END_TEST

/* Writes OUTDIR/dir/NAME.csv, a one-row workload table whose run `run` names trace file `trace`,
 * and the run's trainer log (two steady steps) in OUTDIR/dir/logs/. */
static void workload_table_at(const char *dir, const char *name, const char *run, const char *trace)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", OUTDIR, dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/%s/logs", OUTDIR, dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/%s/%s.csv", OUTDIR, dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "workload,model,batch,vranks,policy,dist,steps,step_ms_median,step_ms_mean,mem_gib,trace\n"
               "%s,bert-base,16,1,none,wiki512,2,9.3,9.4,5.0,%s\n", run, trace);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s/logs/%s.log", OUTDIR, dir, run);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "step      9/10 | loss 11.1 | 100.0 samples/s | 9.25 ms/step | ETA 1s\n"
               "step     10/10 | loss 11.1 | 100.0 samples/s | 9.50 ms/step | ETA 1s\n");
    fclose(f);
}

/* calibrate --workloads, repeated: the step overhead from the untraced steps of every table's runs,
 * each table's logs beside it; with several tables a trace counts as a row's only beside that row's
 * table (runs of two machines share names), with one table its file name suffices. */
START_TEST(test_calibrate_workloads_tables)
{
    char trace[512], args[2048], path[1200];
    tu_path(trace, sizeof trace, "tests/data/synthetic-calib-bert-base.csv");
    workload_table_at("wa", "t", "cw-a", "none.csv");
    workload_table_at("wb", "t", "cw-b", "none.csv");
    snprintf(args, sizeof args, "calibrate --traces '%s' --workloads %%D/wa/t.csv --workloads %%D/wb/t.csv "
                                "--out %%D/two.cfg", trace);
    ck_assert_int_eq(run(args), 0);
    char *text = slurp("stdout.txt");
    ck_assert_msg(strstr(text, "step overhead and host time per kernel from 4 untraced steps of 2 workloads"), "%s",
                  text);
    free(text);
    ck_assert(exists("two.cfg"));
    /* a table is an input: --out onto it is refused before any work, the table left as it was */
    snprintf(args, sizeof args, "calibrate --traces '%s' --workloads %%D/wa/t.csv --workloads %%D/wb/t.csv "
                                "--out %%D/wb/t.csv 2> %%D/err.txt", trace);
    ck_assert_int_eq(run(args), 1);
    text = slurp("wb/t.csv");
    ck_assert_msg(strstr(text, "cw-b,bert-base,16,1,none,wiki512,2,"), "%s", text);
    free(text);
    /* the same trace file as syn.csv in wa/; tables in wb/ and wc/ name syn.csv */
    snprintf(path, sizeof path, "cp '%s' %s/wa/syn.csv", trace, OUTDIR);
    ck_assert_int_eq(system(path), 0);
    workload_table_at("wb", "s", "cw-b", "syn.csv");
    workload_table_at("wc", "s", "cw-c", "syn.csv");
    /* one table: the file name is enough, so the run's reproduced lengths are checked against the
     * trace's rows, which another run made */
    ck_assert_int_eq(run("calibrate --traces %D/wa/syn.csv --workloads %D/wb/s.csv 2> %D/err.txt"), 1);
    text = slurp("err.txt");
    ck_assert_msg(strstr(text, "another run's?"), "%s", text);
    free(text);
    /* two tables, neither beside the trace: not theirs, and the fit goes on */
    ck_assert_int_eq(run("calibrate --traces %D/wa/syn.csv --workloads %D/wb/s.csv --workloads %D/wc/s.csv "
                         "2> %D/err.txt"), 0);
    text = slurp("stdout.txt");
    ck_assert_msg(strstr(text, "attention lengths of 0 traced batches") &&
                      strstr(text, "step overhead and host time per kernel from 4 untraced steps of 2 workloads"),
                  "%s", text);
    free(text);
}
END_TEST

START_TEST(test_doc_checker_catches_drift)
{
    /* The checker itself: an undocumented key, a missing key and a wrong type all fail. */
    load_doc();
    const doc_table *row = table_named("row", 1);
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(key_at(row, "fmha_bounds[]"));
    ck_assert_ptr_nonnull(key_at(row, "attn_us"));
    ck_assert_str_eq(key_at(row, "attn_us")->type, "number|null");
    const doc_table *stat = table_named("stat", 1);
    struct { const char *json, *why; } cases[] = {
        {"{\"n\":3,\"median_abs_pct\":1.5,\"max_abs_pct\":null,\"bias_pct\":2}", NULL},
        {"{\"n\":3,\"median_abs_pct\":1.5,\"max_abs_pct\":null,\"bias_pct\":2,\"x\":1}",
         "stat.x is not in docs/json.md"},
        {"{\"n\":3,\"median_abs_pct\":1.5,\"max_abs_pct\":null}", "stat.bias_pct is documented but missing"},
        {"{\"n\":3.5,\"median_abs_pct\":1.5,\"max_abs_pct\":null,\"bias_pct\":2}",
         "stat.n: not of the documented type integer"},
        {"{\"n\":3,\"median_abs_pct\":\"1.5\",\"max_abs_pct\":null,\"bias_pct\":2}",
         "stat.median_abs_pct: not of the documented type number|null"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jr_node *v = jr_parse(cases[i].json, NULL, 0);
        ck_assert_ptr_nonnull(v);
        WHY[0] = '\0';
        int rc = check_object(v, stat, "", "stat");
        jr_free(v);
        if (!cases[i].why)
            ck_assert_msg(rc == 0, "%s", WHY);
        else
            ck_assert_msg(rc == 1 && strstr(WHY, cases[i].why), "case %zu: %s", i, WHY);
    }
    /* an array whose elements are not documented */
    doc_table t = {.name = "t", .n = 1};
    snprintf(t.keys[0].path, sizeof t.keys[0].path, "a");
    snprintf(t.keys[0].type, sizeof t.keys[0].type, "array");
    jr_node *v = jr_parse("{\"a\":[1]}", NULL, 0);
    ck_assert_int_eq(check_object(v, &t, "", "t"), 1);
    ck_assert_ptr_nonnull(strstr(WHY, "its elements (a[]) are not documented"));
    jr_free(v);
}
END_TEST

/* "-" is standard output for every output that can go there: the CSVs as --json; that output
 * alone (no text, no file named "-"), one output at most there, and none for the outputs that
 * need a file. */
START_TEST(test_dash_is_stdout)
{
    struct stat st;
    const int had_dash = stat("-", &st) == 0, had_partial = stat("-.partial", &st) == 0;
    ck_assert_int_eq(run("predict --batch 8 --steps 3 --csv -"), 0);
    char *out = slurp("stdout.txt");
    ck_assert_msg(!strncmp(out, "# unpad", 7) && strstr(out, TRACE_HEADER) && !strstr(out, "wrote"), "%.300s", out);
    free(out);
    ck_assert_int_eq(run("whatif --gpus 8 --batch 8 --steps 3 --policy kk --attn-steps 0 --quiet --csv -"), 0);
    out = slurp("stdout.txt");
    ck_assert_msg(!strncmp(out, "# unpad", 7) && strstr(out, "# complete: 1 configurations\n") &&
                      !strstr(out, "wrote"), "%.300s", out);
    free(out);
    if (!had_dash)
        ck_assert_msg(stat("-", &st) != 0, "a file named '-' was written");
    if (!had_partial)
        ck_assert_msg(stat("-.partial", &st) != 0, "a file named '-.partial' was written");
    static const struct { const char *args, *says; } refused[] = {
        {"predict --batch 8 --steps 3 --json - --csv -", "--csv - and --json -: both to standard output"},
        {"whatif --gpus 8 --batch 8 --steps 3 --csv - --json -", "both to standard output"},
        {"predict --batch 8 --steps 3 --csv - --layout unpadded,padded", "--csv -: a CSV per layout"},
        {"validate --traces traces/x.csv --plot -", "--plot -: not to standard output"},
        {"plan --gpus 8 --batch 8 --out -", "--out -: not to standard output"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "%s 2> %%D/err.txt", refused[i].args);
        ck_assert_int_eq(run(cmd), 2 - (i == 2));
        char *err = slurp("err.txt");
        out = slurp("stdout.txt");
        ck_assert_msg(strstr(err, refused[i].says), "%s: %s", refused[i].args, err);
        ck_assert_msg(!*out, "%s wrote to standard output: %.200s", refused[i].args, out);
        free(err);
        free(out);
    }
}
END_TEST

Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_stats_datamove);
    tcase_add_test(tc, test_predict);
    tcase_add_test(tc, test_predict_buckets_batch);
    tcase_add_test(tc, test_plan_layouts_unpadded_once);
    tcase_add_test(tc, test_max_len_truncates_long_lengths);
    tcase_add_test(tc, test_whatif);
    tcase_add_test(tc, test_whatif_partial_names);
    tcase_add_test(tc, test_fp8_memory);
    tcase_add_test(tc, test_last_layer);
    tcase_add_test(tc, test_plot_out_is_a_prefix);
    tcase_add_test(tc, test_plan_validate);
    tcase_add_test(tc, test_calibrate_workloads);
    tcase_add_test(tc, test_calibrate_workloads_tables);
    tcase_add_test(tc, test_validate_workloads_json);
    tcase_add_test(tc, test_doc_checker_catches_drift);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_readme_example);
    tcase_add_test(tc, test_time_to_train);
    tcase_add_test(tc, test_refused_before_any_work);
    tcase_add_test(tc, test_dash_is_stdout);
    suite_add_tcase(s, tc);
    return s;
}
