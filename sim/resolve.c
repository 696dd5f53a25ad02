/* resolve.c — the project home, the default input files, and a run's inputs with the plan and
 * the flags merged (the rules are in resolve.h). */
#include "resolve.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "balance.h"
#include "cost.h"
#include "group.h"
#include "layout.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int resolve_home(char *buf, size_t n, unpad_err *err)
{
    const char *home = getenv("UNPAD_HOME");
    if (home && *home) {
        size_t len = strlen(home);
        while (len > 1 && home[len - 1] == '/')
            len--;
        if (len >= n)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "UNPAD_HOME: path too long (%zu bytes)", len);
        memcpy(buf, home, len);
        buf[len] = '\0';
        return UNPAD_OK;
    }
    /* <home>/bin/<program>: the folder above bin/. */
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    buf[0] = '\0';
    if (len <= 0)
        return UNPAD_OK;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return UNPAD_OK;
    *slash = '\0';
    slash = strrchr(exe, '/');
    if (!slash || strcmp(slash + 1, "bin"))
        return UNPAD_OK; /* not in a bin/ folder: the current folder */
    *slash = '\0';
    if (!exe[0])
        strcpy(exe, "/");
    if (strlen(exe) >= n)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "project home %s: path too long", exe);
    strcpy(buf, exe);
    return UNPAD_OK;
}

int resolve_project_path(const char *rel, char *buf, size_t n, unpad_err *err)
{
    char home[RESOLVE_PATH_LEN];
    int rc = resolve_home(home, sizeof home, err);
    if (rc)
        return rc;
    int w = home[0] ? snprintf(buf, n, "%s%s%s", home, strcmp(home, "/") ? "/" : "", rel)
                    : snprintf(buf, n, "%s", rel);
    if (w < 0 || (size_t)w >= n)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s under %s: path too long", rel, home);
    return UNPAD_OK;
}

/* The names of dir's files that end in ext, without it, comma-separated into buf ("" when none). */
static void list_names(const char *dir, const char *ext, char *buf, size_t n)
{
    buf[0] = '\0';
    DIR *d = opendir(dir);
    if (!d)
        return;
    const char *names[64];
    char store[64][256];
    int k = 0;
    size_t le = strlen(ext);
    for (struct dirent *e; (e = readdir(d)) && k < 64;) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.' || l <= le || l - le >= sizeof store[0] || strcmp(e->d_name + l - le, ext))
            continue;
        memcpy(store[k], e->d_name, l - le);
        store[k][l - le] = '\0';
        names[k] = store[k];
        k++;
    }
    closedir(d);
    qsort(names, (size_t)k, sizeof names[0], cmp_str);
    size_t w = 0;
    for (int i = 0; i < k && w < n; i++)
        w += (size_t)snprintf(buf + w, n - w, "%s%s", i ? ", " : "", names[i]);
}

int resolve_named(const char *given, const char *flag, const char *dir, const char *ext, char *out, size_t n,
                  unpad_err *err)
{
    if (!*given)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s: empty file name", flag);
    if (strlen(given) >= n)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s: path too long", flag);
    strcpy(out, given);
    struct stat st;
    if (!dir || strchr(given, '/') || (stat(given, &st) == 0 && !S_ISDIR(st.st_mode)))
        return UNPAD_OK; /* a folder of that name here (a checkpoint's, say) is not the file meant */
    /* a bare name: the project's file of that name */
    size_t lg = strlen(given), le = strlen(ext);
    int has_ext = lg > le && !strcmp(given + lg - le, ext);
    char rel[RESOLVE_PATH_LEN], folder[RESOLVE_PATH_LEN], path[RESOLVE_PATH_LEN];
    if (snprintf(rel, sizeof rel, "%s/%s%s", dir, given, has_ext ? "" : ext) >= (int)sizeof rel)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s: path too long", flag);
    int rc = resolve_project_path(rel, path, sizeof path, err);
    if (rc)
        return rc;
    if (access(path, F_OK) == 0) {
        if (strlen(path) >= n)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s: path too long", flag);
        strcpy(out, path);
        return UNPAD_OK;
    }
    if ((rc = resolve_project_path(dir, folder, sizeof folder, err)))
        return rc;
    char names[1024];
    list_names(folder, ext, names, sizeof names);
    if (strchr(given, ','))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s %s: one file, not a list%s; the project's own: %s", flag,
                          given, strcmp(flag, "--hw") ? "" : " (several go with `unpad plan --hw A,B`)",
                          names[0] ? names : "none");
    return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s %s: no such file here, and no %s; the project's own: %s", flag,
                      given, path, names[0] ? names : "none");
}

/* The path as given (or the project's file of that name, resolve_named), or the default under the
 * project home. */
static int input_path(const char *given, const char *flag, const char *def_rel, const char *dir,
                      const char *ext, char *out, unpad_err *err)
{
    if (!given) {
        int rc = resolve_project_path(def_rel, out, RESOLVE_PATH_LEN, err);
        if (rc || access(out, R_OK) == 0)
            return rc;
        char home[RESOLVE_PATH_LEN];
        if ((rc = resolve_home(home, sizeof home, err)))
            return rc;
        return unpad_fail(err, UNPAD_EIO, out, 0,
                          "cannot read the default of %s (%s). The project home is %s: $UNPAD_HOME, else the folder "
                          "above the program's bin/, else the current folder; set UNPAD_HOME to the unpad folder "
                          "that holds models/, or pass %s",
                          flag, strerror(errno), home[0] ? home : "the current folder", flag);
    }
    return resolve_named(given, flag, dir, ext, out, RESOLVE_PATH_LEN, err);
}

int resolve_hw_by_device(const char *device, char *out, size_t n, hw_spec *hw, unpad_err *err)
{
    char dir[RESOLVE_PATH_LEN], path[RESOLVE_PATH_LEN];
    out[0] = '\0';
    int rc = resolve_project_path("models/hw", dir, sizeof dir, err);
    if (rc)
        return rc;
    DIR *d = opendir(dir);
    if (!d)
        return UNPAD_OK;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.' || l <= 4 || strcmp(e->d_name + l - 4, ".cfg"))
            continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path || strlen(path) >= n) {
            closedir(d);
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s/%s: path too long", dir, e->d_name);
        }
        hw_spec h;
        unpad_err he = {0};
        if ((rc = hw_load(path, &h, &he))) {
            closedir(d);
            return unpad_fail(err, rc, NULL, 0, "%s (read while looking for the spec of the GPU '%s'; --hw names one)",
                              he.msg, device);
        }
        if (strcmp(h.device, device))
            continue;
        if (out[0]) {
            closedir(d);
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "%s and %s both say device = %s: keep it in one, or pass --hw", out, path, device);
        }
        strcpy(out, path);
        *hw = h;
    }
    closedir(d);
    return UNPAD_OK;
}

int resolve_hw_set(const char *set, hw_spec *hw, unpad_err *err)
{
    char text[1024];
    size_t o = 0, len = strlen(set);
    if (len == 0 || len >= 512)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--hw-set: give KEY=VALUE[,KEY=VALUE...] of fewer than 512 "
                          "characters (e.g. gpus_per_node=4,node_bw_gbs=25)");
    for (const char *p = set; *p;) { /* one `key = value` line an item */
        const char *end = strchr(p, ','), *eq;
        size_t n = end ? (size_t)(end - p) : strlen(p);
        eq = memchr(p, '=', n);
        if (!eq || eq == p || eq + 1 == p + n)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--hw-set: '%.*s' is not KEY=VALUE (e.g. gpus_per_node=4)",
                              (int)n, p);
        size_t k = (size_t)(eq - p);
        if ((k == 4 && !strncmp(p, "name", 4)) || (k == 6 && !strncmp(p, "device", 6)))
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--hw-set: %.*s names the spec and chooses its calibration: "
                              "give another --hw instead", (int)k, p);
        if (o + n + 4 > sizeof text) /* cannot happen under 512 characters: each item grows by 3 */
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--hw-set: too many items");
        o += (size_t)snprintf(text + o, sizeof text - o, "%.*s = %.*s\n", (int)k, p, (int)(n - k - 1), eq + 1);
        p += n + (end ? 1 : 0);
        if (end && !*p)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--hw-set: '%s' ends with a comma", set);
    }
    cfg_field relaxed[64]; /* the spec's keys, none required: the others keep the spec's values */
    if (hw_schema_len > sizeof relaxed / sizeof *relaxed)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--hw-set: the spec has too many keys");
    for (size_t i = 0; i < hw_schema_len; i++) {
        relaxed[i] = hw_schema[i];
        relaxed[i].required = CFG_OPTIONAL;
    }
    hw_spec h = *hw;
    int rc = cfg_parse("--hw-set", text, o, relaxed, hw_schema_len, &h, err);
    if (!rc)
        *hw = h;
    return rc;
}

static int load_hw_spec(const resolve_req *rq, resolve_inputs *in, unpad_err *err)
{
    int rc;
    in->hw_from = rq->hw ? HW_GIVEN : HW_DEFAULT;
    in->hw_path[0] = '\0';
    if (!rq->hw && rq->device && *rq->device) {
        if ((rc = resolve_hw_by_device(rq->device, in->hw_path, sizeof in->hw_path, &in->hw, err)))
            return rc;
        if (in->hw_path[0]) {
            in->hw_from = HW_MATCHED;
            return UNPAD_OK;
        }
    }
    if ((rc = input_path(rq->hw, "--hw", "models/hw/h200-sxm.cfg", "models/hw", ".cfg", in->hw_path, err)))
        return rc;
    return hw_load(in->hw_path, &in->hw, err);
}

static int load_hw(const resolve_req *rq, resolve_inputs *in, unpad_err *err)
{
    int rc = load_hw_spec(rq, in, err);
    in->hw_set[0] = '\0';
    if (!rc && rq->hw_set && !(rc = resolve_hw_set(rq->hw_set, &in->hw, err)))
        snprintf(in->hw_set, sizeof in->hw_set, "%s", rq->hw_set);
    return rc;
}

static int load_calib(const resolve_req *rq, resolve_inputs *in, unpad_err *err)
{
    if (rq->calib && rq->no_calib)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--calib and --no-calib exclude each other");
    in->calib_path[0] = '\0';
    if (rq->calib) {
        int rc = input_path(rq->calib, "--calib", NULL, "models/calib", ".cfg", in->calib_path, err);
        if (rc)
            return rc;
    } else if (!rq->no_calib) {
        for (int f8 = rq->fp8 ? 1 : 0; f8 >= 0 && !in->calib_path[0]; f8--) {
            char rel[CFG_STR_LEN + 32];
            snprintf(rel, sizeof rel, "models/calib/%s%s.cfg", in->hw.name, f8 ? "-fp8" : "");
            int rc = resolve_project_path(rel, in->calib_path, RESOLVE_PATH_LEN, err);
            if (rc)
                return rc;
            if (access(in->calib_path, R_OK) != 0)
                in->calib_path[0] = '\0';
        }
    }
    if (in->calib_path[0]) {
        int rc = calib_load(in->calib_path, &in->hw, &in->calib, err);
        if (rc)
            return rc;
        if (in->calib.fp8 && !rq->fp8)
            return unpad_fail(err, UNPAD_EINVAL, in->calib_path, 0,
                              "fitted on traces of unpad-train --fp8 on (fp8 = true): pass --fp8 on, or a "
                              "calibration of the bf16 products (models/calib/%s.cfg)", in->hw.name);
    } else {
        calib_default(&in->hw, &in->calib);
    }
    in->calib_from = calib_source_of(&in->calib);
    int rc = rq->faster ? calib_faster(&in->calib, rq->faster, err) : UNPAD_OK;
    if (!rc && rq->graphs)
        calib_graphs(&in->calib);
    return rc;
}

/* The plan (or the no-plan defaults) with the flags on top. */
static int merge_plan(const resolve_req *rq, resolve_inputs *in, unpad_err *err)
{
    unpad_plan *p = &in->plan;
    in->plan_path[0] = '\0';
    in->have_plan = 0;
    if (rq->plan) {
        int rc = input_path(rq->plan, "--plan", NULL, NULL, NULL, in->plan_path, err);
        if (!rc)
            rc = plan_load(in->plan_path, p, err);
        if (rc)
            return rc;
        in->have_plan = 1;
    } else {
        plan_default(p);
        p->policy = BAL_NONE;
        p->streams = 0;
    }
    unpad_err pe = {0};
    if (rq->policy && balance_policy_parse(rq->policy, &p->policy, &pe))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--policy: %s", pe.msg);
    if (rq->count && balance_count_parse(rq->count, &p->count, &pe))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--count: %s", pe.msg);
    if (rq->fmha_groups) {
        unpad_err ge = {0};
        if (group_bounds_parse(rq->fmha_groups, p->fmha_bounds, &p->fmha_nb, &ge))
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--fmha-groups: %s", ge.msg);
    }
    if (rq->streams) {
        if (rq->streams < 1 || rq->streams > GROUP_MAX_STREAMS)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--streams: %d is not in [1, %d]",
                              rq->streams, GROUP_MAX_STREAMS);
        p->streams = rq->streams;
    }
    if (rq->tokens)
        p->weights_tokens = 1;
    /* The cost the balancer uses: the plan's, unless a calibration was named for this run. */
    if (!in->have_plan || rq->calib) {
        int rc = cost_seq_model(&in->model, &in->hw, &in->calib, &p->cost, err);
        if (rc)
            return rc;
    }
    return UNPAD_OK;
}

/* A distribution longer than the model: cut to the model's max_len under a cap (the cap truncates
 * those lengths anyway), else an error. */
static int fit_dist(const resolve_req *rq, resolve_inputs *in, unpad_err *err)
{
    int top = in->model.max_len, rc;
    in->dist_longest = in->dist.max_len;
    if (in->dist.max_len <= top)
        return UNPAD_OK;
    if (!rq->max_len)
        return unpad_fail(err, UNPAD_EINVAL, in->dist_path, 0,
                          "lengths up to %d, but %s trains at most %d (--max-len N, N at most %d, "
                          "truncates the longer sequences)",
                          in->dist.max_len, in->model_path, top, top);
    if ((rc = layout_check_cap(rq->max_len, top, err)))
        return rc;
    unpad_dist cut;
    if ((rc = layout_truncate(&in->dist, top, &cut, err)))
        return rc;
    dist_free(&in->dist);
    in->dist = cut;
    return UNPAD_OK;
}

int resolve_inputs_load(const resolve_req *rq, resolve_inputs *in, unpad_err *err)
{
    memset(in, 0, sizeof *in);
    int rc;
    if ((rc = input_path(rq->model, "--model", "models/bert-large.cfg", "models", ".cfg", in->model_path, err)) ||
        (rc = model_load(in->model_path, &in->model, err)) ||
        (rc = load_hw(rq, in, err)) || (rc = load_calib(rq, in, err)))
        return rc;
    if (rq->need_dist) {
        if ((rc = input_path(rq->dist, "--dist", "models/dists/wiki512.csv", "models/dists", ".csv",
                               in->dist_path, err)) ||
            (rc = dist_load(in->dist_path, &in->dist, err)))
            return rc;
        if ((rc = fit_dist(rq, in, err)))
            return rc;
    }
    return merge_plan(rq, in, err);
}

void resolve_inputs_free(resolve_inputs *in)
{
    dist_free(&in->dist);
}
