/* train_setup.c — a run's setup: its inputs, data, model, balancer and outputs (trainer.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gpu/devmem.h"
#include "gpu/trainer.h"
#include "plan.h"
#include "resolve.h"

/* The run's inputs through the library's resolver (sim/resolve.h, the same as `unpad`'s): model,
 * hardware, calibration, distribution (synthetic data), the plan with the flags on top of it. */
static int resolve_run_inputs(trainer *t, unpad_err *err)
{
    const train_args *a = t->a;
    /* The GPU's name (comm_init has chosen the rank's GPU) picks its hardware spec (resolve.h). */
    int dev = 0;
    struct cudaDeviceProp prop;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    snprintf(t->device, sizeof t->device, "%s", prop.name);
    resolve_req rq = train_resolve_req(a, t->device);
    int rc = resolve_inputs_load(&rq, &t->in, err);
    if (rc)
        return rc;
    const unpad_plan *plan = &t->in.plan;
    t->cfg = t->in.model;
    if (a->attn_dropout >= 0)
        t->cfg.attn_dropout = a->attn_dropout;
    t->hw = t->in.hw;
    t->cc = t->in.calib;
    snprintf(t->hw_from, sizeof t->hw_from, "%.3500s, %s%.256s%s", t->in.hw_path,
             t->in.hw_from == HW_GIVEN     ? "as given"
             : t->in.hw_from == HW_MATCHED ? "its device names this GPU"
                                           : "the default: no spec under models/hw says device = ",
             t->in.hw_from == HW_DEFAULT ? t->device : "", t->in.hw_from == HW_DEFAULT ? "; --hw names one" : "");
    snprintf(t->calib_from, sizeof t->calib_from, "%.4000s%s",
             t->in.calib_path[0] ? t->in.calib_path : "the uncalibrated defaults",
             t->in.calib_from == CALIB_TRANSFERRED ? " (an estimate: transferred from other hardware)" : "");
    fmha_grouping *fg = &t->fg;
    *fg = (fmha_grouping){.nb = plan->fmha_nb, .hw = &t->hw, .cc = &t->cc, .heads = t->cfg.heads};
    memcpy(fg->bounds, plan->fmha_bounds, sizeof fg->bounds);
    group_opts_default(&fg->opts);
    if (t->in.have_plan)
        fg->opts.granularity = plan->fmha_granularity;
    fg->opts.max_streams = plan->streams ? plan->streams : 2;
    t->balanced = train_balanced(a, &t->in, t->comm.launcher);
    t->policy = t->balanced ? plan->policy : BAL_NONE;
    t->count = t->balanced ? plan->count : BAL_EQUAL;
    t->weights_tokens = t->balanced && plan->weights_tokens;
    t->scost = plan->cost;
    return train_check_layout(a, &t->in, &t->comm, err);
}

static int setup_data(trainer *t, unpad_err *err)
{
    const train_args *a = t->a;
    int rc;
    if (a->synthetic) {
        if ((rc = source_synthetic(&t->cfg, &t->in.dist, (uint64_t)a->seed, &t->src, err)))
            return rc;
    } else if ((rc = source_shard(&t->cfg, a->data, (uint64_t)a->seed, &t->src, err))) {
        return rc;
    }
    if (a->eval && (rc = source_shard(&t->cfg, a->eval, 0, &t->evsrc, err)))
        return rc;
    t->max_len = source_max_len(t->src);
    if (t->evsrc && source_max_len(t->evsrc) > t->max_len)
        t->max_len = source_max_len(t->evsrc);
    return UNPAD_OK;
}

/* Host buffers of the step loop; every allocation checked. */
static int setup_buffers(trainer *t, unpad_err *err)
{
    int K = t->K, R = t->R;
    t->bufs = calloc(2 * (size_t)K, sizeof *t->bufs);
    t->lens = malloc((size_t)t->seq_cap * sizeof *t->lens);
    t->pred_buf = calloc(2 * (size_t)R, sizeof *t->pred_buf);
    t->meas_us = calloc((size_t)K, sizeof *t->meas_us);
    t->rank_us = calloc((size_t)K, sizeof *t->rank_us);
    t->evr = calloc(2 * (size_t)K, sizeof *t->evr);
    if (!t->bufs || !t->lens || !t->pred_buf || !t->meas_us || !t->rank_us || !t->evr)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory for the step's buffers");
    for (int r = 0; r < 2 * K; r++)
        /* free counts: more, shorter sequences may round their 15% up once each */
        if (shard_batch_alloc(&t->bufs[r], t->seq_cap, (long)t->B * t->max_len,
                              (long)t->B * t->cfg.max_predictions + (t->seq_cap - t->B)))
            return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory for the batches");
    if (cudaMallocHost((void **)&t->stop_host, sizeof *t->stop_host) != cudaSuccess) {
        cudaGetLastError();
        t->stop_host = NULL;
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of pinned host memory");
    }
    int rc;
    if ((rc = dev_alloc((void **)&t->stop_dev, sizeof *t->stop_dev, "the stop flag", err)))
        return rc;
    cudaCheck(cudaEventCreateWithFlags(&t->ev_ar, cudaEventDisableTiming));
    cudaCheck(cudaEventCreate(&t->ev_step[0]));
    cudaCheck(cudaEventCreate(&t->ev_step[1]));
    for (int r = 0; r < 2 * K; r++)
        cudaCheck(cudaEventCreate(&t->evr[r]));
    if (t->a->online) {
        online_opts oo = {.window = t->a->online_window};
        if ((rc = online_alloc(&oo, R, &t->oc, err)))
            return rc;
        t->olen = malloc(2 * (size_t)t->step_samples * sizeof *t->olen);
        t->ooff = malloc(2 * ((size_t)R + 1) * sizeof *t->ooff);
        t->otime = malloc((size_t)R * sizeof *t->otime);
        if (!t->olen || !t->ooff || !t->otime)
            return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory for --calibrate-online");
        if ((rc = dev_alloc((void **)&t->otime_dev, (size_t)R * sizeof *t->otime_dev, "--calibrate-online", err)))
            return rc;
    }
    return UNPAD_OK;
}

static int setup_model(trainer *t, unpad_err *err)
{
    const train_args *a = t->a;
    int B = t->B;
    /* with free counts a rank may take more, shorter sequences than B */
    t->seq_cap = t->balanced && t->count == BAL_FREE ? (4 * B < t->R * B ? 4 * B : t->R * B) : B;
    /* Activations for the tokens a micro-batch of B will hold but once in millions (the source's
     * lengths; --act-tokens instead), made again, larger, for a micro-batch that holds more, up to
     * B x the longest length (what the loader's buffers hold). */
    long most = (long)B * t->max_len, act = a->act_tokens;
    if (!act) {
        long ev = t->evsrc ? source_arena_tokens(t->evsrc, B) : 0;
        act = source_arena_tokens(t->src, B);
        act = ev > act ? ev : act;
    }
    act = act < most ? act : most;
    t->opt = (bert_options){.gelu_erf = a->gelu_erf, .dropout = !a->no_dropout, .seed = (uint64_t)a->seed,
                            .max_tokens = (int)act, .grow_tokens = (int)most, .max_seqs = t->seq_cap,
                            .max_preds = B * t->cfg.max_predictions + (t->seq_cap - B), .fp8 = a->fp8,
                            .last_heads = a->last_heads};
    if (!(t->b = bert_create(&t->cfg, &t->opt, err)))
        return err->code ? err->code : UNPAD_ENOMEM;
    cudaCheck(cudaStreamCreateWithFlags(&t->s, cudaStreamNonBlocking));
    if (a->graphs && !(t->graphs = step_graphs_create(t->K, err)))
        return err->code ? err->code : UNPAD_ENOMEM;
    if (t->balanced) {
        int rc = step_model_init(&t->step, &t->cfg, &t->hw, &t->cc, step_trainer_flags(a->last_heads), err);
        if (rc)
            return rc;
        dp_options o = {.K = t->K, .B = B, .max_len = t->max_len, .max_pred = t->cfg.max_predictions,
                        .policy = t->policy, .count = t->count, .tokens = t->weights_tokens, .cost = t->scost,
                        .step = &t->step};
        if (!(t->dpp = dp_create(&t->comm, &o, t->opt.grow_tokens, err)))
            return err->code ? err->code : UNPAD_ENOMEM;
    }
    if (t->comm.launcher != COMM_SINGLE && a->bucket_mb > 0 &&
        !(t->gs = gradsync_create(&t->comm, bert_grad(t->b), bert_param_count(t->b), a->bucket_mb * 1048576.0, err)))
        return err->code ? err->code : UNPAD_ENOMEM;
    return UNPAD_OK;
}

static int open_file(const char *path, const char *mode, FILE **f, unpad_err *err)
{
    if (path && !(*f = fopen(path, mode)))
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write: %s", strerror(errno));
    return UNPAD_OK;
}

/* The products the trace's rows were measured with (its products line, sim/trace.h). */
static int trace_products_of(const train_args *a)
{
#ifdef UNPAD_FP32
    (void)a;
    return TRACE_FP32;
#else
    return a->fp8 ? TRACE_FP8 : TRACE_BF16;
#endif
}

/* Traces (a CSV, a JSON file per process), the metrics file, the batch dump. The traces and the
 * metrics file are streamed under their own names, a record at a time: they are meant to be read
 * while the run goes on (and keep what was done when it is killed). The batch dump, like the
 * other dumps and the summary, is a whole file and goes through sim/outfile.h (complete or not
 * there). */
static int setup_outputs(trainer *t, unpad_err *err)
{
    const train_args *a = t->a;
    int rc;
    if ((rc = open_file(a->trace, "w", &t->tcsv, err)))
        return rc;
    if (a->trace_json) {
        char path[4200];
        if ((rc = chrome_trace_rank_path(a->trace_json, t->comm.rank, t->comm.size, path, sizeof path, err)) ||
            (rc = chrome_trace_open(path, t->start_us, UNPAD_BUILD, &t->tjson, err)))
            return rc;
    }
    if ((t->tcsv || t->tjson) &&
        !(t->tr = optrace_create(t->hw.name, &t->cfg, trace_products_of(a), t->tcsv, t->tjson, t->comm.rank, t->K,
                                 t->start_us, err)))
        return err->code;
    if (t->tr)
        optrace_set_last_heads(t->tr, t->opt.last_heads);
    if (t->rank0 && (rc = train_log_open(a->log_file, a->resume != NULL, &t->log, err)))
        return rc;
    if (t->rank0 && a->dump_batches && (rc = dump_open(&t->dumpb, a->dump_batches, err)))
        return rc;
    return UNPAD_OK;
}

int trainer_create(trainer *t, const train_args *a, int argc, char **argv, unpad_err *err)
{
    memset(t, 0, sizeof *t);
    t->a = a;
    t->argc = argc;
    t->argv = argv;
    t->first_loss = -1;
    t->eval_loss = t->eval_acc = NAN;
    t->start_us = chrome_trace_now_us();
    int rc = comm_init(&t->comm, err);
    t->rank0 = t->comm.rank == 0; /* known even when no GPU is: the summary still gets written */
    if (rc)
        return rc;
    t->K = a->vranks;
    t->B = a->batch;
    t->R = t->comm.size * t->K;
    t->step_samples = (int64_t)t->R * t->B;
    /* ranks = all ranks x virtual ranks: the global batch's layout, whatever the process count */
    t->st = (ckpt_state){.step = 0, .data_pos = 0, .seed = (uint64_t)a->seed, .batch = t->B, .ranks = t->R};
    const char *hold = getenv("UNPAD_HOLD_STEP_US");
    if (hold && *hold) {
        char *end;
        t->hold_us = strtod(hold, &end);
        if (*end || !(t->hold_us >= 0 && t->hold_us <= 1e6))
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "UNPAD_HOLD_STEP_US='%s': expected microseconds in 0..1000000", hold);
        if (t->hold_us > 0 && a->trace)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "UNPAD_HOLD_STEP_US with --trace: the traced steps would count the wait");
    }
    if ((rc = resolve_run_inputs(t, err)) || (rc = setup_data(t, err)) || (rc = setup_model(t, err)) ||
        (rc = setup_buffers(t, err)) || (rc = setup_outputs(t, err)))
        return rc;
    if (!t->rank0) /* one voice: rank 0 reports for all */
        if (!freopen("/dev/null", "w", stdout))
            return unpad_fail(err, UNPAD_EIO, "/dev/null", 0, "cannot silence rank %d: %s", t->comm.rank,
                              strerror(errno));
    const char *poison = getenv("UNPAD_POISON_GRADS");
    t->poison_grads = a->grad_write && poison && !strcmp(poison, "1");
    trainer_print_setup(t);
    if (t->poison_grads)
        printf("  UNPAD_POISON_GRADS=1: the gradients are filled with NaN before every step (each must be written)\n");
    else if (poison && !strcmp(poison, "1"))
        printf("  UNPAD_POISON_GRADS=1 ignored: --grad-write off zeroes the gradients before every step\n");
    if (t->hold_us > 0)
        printf("  UNPAD_HOLD_STEP_US=%g: the stream waits that long before each step, so the host enqueues the "
               "step ahead of the GPU (a diagnostic; the wall time includes the wait)\n", t->hold_us);
    t->gemm_presets = -2;
    if (a->resume && (rc = trainer_resume(t, err)))
        return rc;
    t->first_step = (int)t->st.step + 1;
    return UNPAD_OK;
}

void trainer_free(trainer *t)
{
    unpad_err e = {0};
    online_free(t->oc);
    free(t->olen);
    free(t->ooff);
    free(t->otime);
    if (t->otime_dev)
        cudaFree(t->otime_dev);
    if (t->stop_dev)
        cudaFree(t->stop_dev);
    if (t->stop_host)
        cudaFreeHost(t->stop_host);
    optrace_free(t->tr);
    chrome_trace_close(t->tjson, &e);
    train_log_close(t->log, &e);
    if (t->tcsv)
        fclose(t->tcsv);
    if (t->dumpb.f && dump_close(&t->dumpb, &e))
        fprintf(stderr, "unpad-train: --dump-batches: %s\n", e.msg);
    gradsync_free(t->gs);
    step_graphs_free(t->graphs);
    dp_free(t->dpp);
    step_model_free(&t->step);
    if (t->evr)
        for (int r = 0; r < 2 * t->K; r++)
            if (t->evr[r])
                cudaEventDestroy(t->evr[r]);
    free(t->evr);
    if (t->ev_ar)
        cudaEventDestroy(t->ev_ar);
    for (int i = 0; i < 2; i++)
        if (t->ev_step[i])
            cudaEventDestroy(t->ev_step[i]);
    if (t->bufs)
        for (int r = 0; r < 2 * t->K; r++)
            shard_batch_free(&t->bufs[r]);
    free(t->bufs);
    free(t->pred_buf);
    free(t->meas_us);
    free(t->rank_us);
    free(t->lens);
    source_free(t->src);
    source_free(t->evsrc);
    resolve_inputs_free(&t->in);
    bert_free(t->b);
    if (t->s)
        cudaStreamDestroy(t->s);
    comm_free(&t->comm);
}
