/* train_preflight.c — a run's inputs and outputs checked on the host, before any rank starts or the
 * GPU is touched (trainer.h), and the parts of the setup both that check and trainer_create use. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu/trainer.h"
#include "outfile.h"

resolve_req train_resolve_req(const train_args *a, const char *device)
{
    return (resolve_req){.model = a->model, .hw = a->hw, .calib = a->calib, .dist = a->dist, .plan = a->plan,
                         .no_calib = a->no_calib, .fp8 = a->fp8, .need_dist = a->synthetic, .policy = a->policy,
                         .count = a->count, .fmha_groups = a->groups, .streams = a->streams, .device = device};
}

int train_balanced(const train_args *a, const resolve_inputs *in, comm_launcher launcher)
{
    /* grouped attention needs micro-batches longest first: the balanced path builds them so */
    return a->policy || in->have_plan || launcher != COMM_SINGLE || in->plan.fmha_nb != 0;
}

int train_check_layout(const train_args *a, const resolve_inputs *in, const comm_t *c, unpad_err *err)
{
    int balanced = train_balanced(a, in, c->launcher);
    if (a->online && (!balanced || in->plan.weights_tokens))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "--calibrate-online refits the balanced per-sequence cost: it needs --policy (or "
                          "--plan with weights = cost)");
    if (a->dump_batches && c->size > 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--dump-batches writes one process's batches: run one process");
    return UNPAD_OK;
}

/* err's message behind "FLAG: " (the library's messages name the file, not the flag). */
static int flag_fail(unpad_err *err, int rc, const char *flag)
{
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    return unpad_fail(err, rc, NULL, 0, "%s: %s", flag, msg);
}

/* The ranks as comm_spawn and comm_init will make them: --nproc N forks N (unless this process is
 * already one of a launcher's ranks), else the environment's. */
static void run_layout(const train_args *a, comm_t *c)
{
    comm_env(c);
    if (a->nproc >= 1 && !getenv("UNPAD_RANK")) {
        c->launcher = COMM_NPROC;
        c->size = a->nproc;
        c->rank = 0;
    }
}

/* Without --hw the spec is the GPU's (resolve.h), unknown here, and the default stands in. A --calib
 * is checked against the hardware it was fitted on instead: the spec of that name under models/hw
 * stands in for the GPU (into hw, n bytes); with none, the calibration is only read here (*skip = 1)
 * and checked against the GPU's spec at start-up. */
static int standin_hw(const train_args *a, char *hw, size_t n, int *skip, unpad_err *err)
{
    hw[0] = '\0';
    *skip = 0;
    if (a->hw || !a->calib || a->no_calib)
        return UNPAD_OK;
    char path[RESOLVE_PATH_LEN], rel[CFG_STR_LEN + 32];
    calib_coef c;
    int rc = resolve_named(a->calib, "--calib", "models/calib", ".cfg", path, sizeof path, err);
    if (rc || (rc = calib_load(path, NULL, &c, err)))
        return rc;
    snprintf(rel, sizeof rel, "models/hw/%s.cfg", c.hw);
    if ((rc = resolve_project_path(rel, hw, n, err)))
        return rc;
    if (access(hw, R_OK) == 0)
        return UNPAD_OK;
    hw[0] = '\0';
    *skip = 1;
    return UNPAD_OK;
}

static int check_inputs(const train_args *a, resolve_inputs *in, unpad_err *err)
{
    char hw[RESOLVE_PATH_LEN];
    int skip_calib;
    int rc = standin_hw(a, hw, sizeof hw, &skip_calib, err);
    if (rc)
        return rc;
    resolve_req rq = train_resolve_req(a, NULL);
    if (hw[0])
        rq.hw = hw;
    if (skip_calib) {
        rq.calib = NULL;
        rq.no_calib = 1;
    }
    return resolve_inputs_load(&rq, in, err);
}

/* The shards as the run opens them (source.h): readable, and of a vocabulary and lengths the model
 * takes. */
static int check_shard(const char *flag, const char *path, const model_cfg *cfg, unpad_err *err)
{
    batch_source *s = NULL;
    int rc = source_shard(cfg, path, 0, &s, err);
    source_free(s);
    return rc ? flag_fail(err, rc, flag) : UNPAD_OK;
}

/* The checkpoint trainer_resume takes: the latest complete one whose header reads and whose seed,
 * batch and rank count are this run's. Its model is checked when the model is built. */
static int check_resume(const train_args *a, const comm_t *c, unpad_err *err)
{
    ckpt_state run = {.seed = (uint64_t)a->seed, .batch = a->batch, .ranks = c->size * a->vranks};
    char path[4200], notes[2048];
    int rc = ckpt_dir_latest(a->resume, NULL, &run, path, sizeof path, notes, sizeof notes, err);
    if (!rc)
        rc = ckpt_file_check(path, NULL, NULL, NULL, err);
    return rc ? flag_fail(err, rc, "--resume") : UNPAD_OK;
}

/* The folder path is in (n bytes into dir; "." for a bare name). */
static int folder_of(const char *path, char *dir, size_t n, unpad_err *err)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 0;
    if (len >= n)
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "path too long");
    if (!len)
        snprintf(dir, n, ".");
    else
        snprintf(dir, n, "%.*s", (int)len, path);
    return UNPAD_OK;
}

/* One output: not an input, not a folder, in a folder that is there (outfile_check_all) and that
 * this process may write; a file written in place (streamed: the metrics file, the traces) must
 * itself be writable where it exists. */
static int check_output(const char *flag, const char *path, int in_place, const char *const *inputs, int ni,
                        unpad_err *err)
{
    if (!path || outfile_is_stdout(path))
        return UNPAD_OK;
    char dir[PATH_MAX];
    int rc = outfile_check_all(&path, 1, inputs, ni, err);
    if (!rc && !(rc = folder_of(path, dir, sizeof dir, err)) && access(dir, W_OK | X_OK))
        rc = unpad_fail(err, UNPAD_EIO, path, 0, "cannot write in folder %s: %s", dir, strerror(errno));
    if (!rc && in_place && access(path, F_OK) == 0 && access(path, W_OK))
        rc = unpad_fail(err, UNPAD_EIO, path, 0, "cannot write: %s", strerror(errno));
    return rc ? flag_fail(err, rc, flag) : UNPAD_OK;
}

/* --save DIR: a folder this process may write in, or one it can make (ckpt_dir_save makes DIR, not
 * the folders above it). */
static int check_save(const char *root, unpad_err *err)
{
    struct stat st;
    char dir[PATH_MAX];
    int rc = UNPAD_OK;
    if (stat(root, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            rc = unpad_fail(err, UNPAD_EIO, root, 0, "not a folder");
        else if (access(root, W_OK | X_OK))
            rc = unpad_fail(err, UNPAD_EIO, root, 0, "cannot write in it: %s", strerror(errno));
    } else if (!(rc = folder_of(root, dir, sizeof dir, err))) {
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            rc = unpad_fail(err, UNPAD_EIO, root, 0, "cannot make it: no folder %s", dir);
        else if (access(dir, W_OK | X_OK))
            rc = unpad_fail(err, UNPAD_EIO, root, 0, "cannot make it in folder %s: %s", dir, strerror(errno));
    }
    return rc ? flag_fail(err, rc, "--save") : UNPAD_OK;
}

static int check_outputs(const train_args *a, const resolve_inputs *in, const comm_t *c, unpad_err *err)
{
    const char *inputs[] = {in->model_path, in->hw_path, in->calib_path, in->dist_path, in->plan_path, a->data,
                            a->eval, a->resume};
    int ni = (int)(sizeof inputs / sizeof inputs[0]);
    char summary[4200], tjson[4200];
    train_summary_path(a->summary_json, a->log_file, summary, sizeof summary);
    int rc = UNPAD_OK;
    if (a->trace_json && (rc = chrome_trace_rank_path(a->trace_json, 0, c->size, tjson, sizeof tjson, err)))
        return flag_fail(err, rc, "--trace-json");
    const char *outs[] = {a->log_file, summary[0] ? summary : NULL, a->trace, a->trace_json ? tjson : NULL,
                          a->dump_w, a->dump_g, a->dump_final, a->dump_batches};
    static const char *const flags[] = {"--log-file", "--summary-json", "--trace", "--trace-json",
                                        "--dump-weights", "--dump-grads", "--dump-final", "--dump-batches"};
    static const int in_place[] = {1, 0, 1, 1, 0, 0, 0, 0};
    int no = (int)(sizeof outs / sizeof outs[0]);
    for (int i = 0; i < no && !rc; i++)
        rc = check_output(flags[i], outs[i], in_place[i], inputs, ni, err);
    if (!rc)
        rc = outfile_check_all(outs, no, inputs, ni, err); /* two outputs of one file */
    if (!rc && a->save)
        rc = check_save(a->save, err);
    return rc;
}

int trainer_preflight(const train_args *a, unpad_err *err)
{
    comm_t c;
    run_layout(a, &c);
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    int rc = check_inputs(a, &in, err);
    model_cfg cfg = in.model;
    if (a->attn_dropout >= 0)
        cfg.attn_dropout = a->attn_dropout;
    if (!rc && a->data)
        rc = check_shard("--data", a->data, &cfg, err);
    if (!rc && a->eval)
        rc = check_shard("--eval", a->eval, &cfg, err);
    if (!rc)
        rc = train_check_layout(a, &in, &c, err);
    if (!rc && a->resume)
        rc = check_resume(a, &c, err);
    if (!rc)
        rc = check_outputs(a, &in, &c, err);
    resolve_inputs_free(&in);
    return rc;
}
