/* trainer.c — the step loop of a run and its stops: a signal (checkpoint, summary, exit 0), a
 * non-finite loss or gradient norm (stop naming the step and the last good checkpoint, or skip the
 * step with --skip-nonfinite). */
#include <math.h>
#include <signal.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gpu/dump.h"
#include "gpu/trainer.h"

static volatile sig_atomic_t g_signal;

static void on_signal(int sig) { g_signal = sig; }

int trainer_signal(void) { return (int)g_signal; }

/* The stop of a non-finite step, or 0 when the run goes on (--skip-nonfinite: the step changed
 * nothing, kernels.h lamb_update). */
static int nonfinite(trainer *t, const step_result *r, const char **outcome, unpad_err *err)
{
    if (t->a->skip_nonfinite) {
        t->skipped++;
        printf("  step %d skipped: loss %g, gradient norm %g (not finite); %d skipped so far\n", r->step, r->loss,
               r->grad_norm, t->skipped);
        return 0;
    }
    *outcome = "diverged";
    unpad_fail(err, UNPAD_ERANGE, NULL, 0,
               "step %d: the loss is %g and the gradient norm %g, not finite: the run stops (the step changed no "
               "weight). Last good checkpoint: %s%s",
               r->step, r->loss, r->grad_norm, t->last_ckpt[0] ? t->last_ckpt : "none",
               t->last_ckpt[0] ? " (continue with --resume, a lower --lr or --skip-nonfinite)" : "");
    return TRAIN_EXIT_DIVERGED;
}

static int evaluate_and_report(trainer *t, int step, unpad_err *err)
{
    double acc, loss;
    int rc = trainer_evaluate(t, &acc, &loss, err);
    if (rc)
        return rc;
    trainer_report_eval(t, step, acc, loss);
    return UNPAD_OK;
}

static int dump_final(trainer *t, unpad_err *err)
{
    if (!t->a->dump_final || !t->rank0)
        return UNPAD_OK;
    dump_file d;
    int rc;
    cudaCheck(cudaStreamSynchronize(t->s));
    if ((rc = dump_open(&d, t->a->dump_final, err)) || (rc = dump_params(&d, t->b, 2, err)) ||
        (rc = dump_close(&d, err)))
        return rc;
    printf("  dumped the master weights after step %lld to %s\n", (long long)t->st.step, t->a->dump_final);
    return UNPAD_OK;
}

static int run_steps(trainer *t, const char **outcome, unpad_err *err)
{
    const train_args *a = t->a;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* reads and waits go on; the loop looks at the flag after the step */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    *outcome = "failed";
    t->t_start = unpad_now_s();
    int rc, evaluated_last = 0;
    /* the first step's micro-batches, then the warm-up on them: the first step then runs as the
     * rest do (no plan made, no kernel loaded inside it); the whole-run figure includes both */
    if (t->first_step <= a->steps) {
        if ((rc = trainer_fetch(t, t->cur, t->st.data_pos, err)))
            return 1;
        t->have_next = 1;
        if ((rc = trainer_warm(t, err)))
            return 1;
    }
    t->win.t0 = unpad_now_s();
    for (int step = t->first_step; step <= a->steps; step++) {
        step_result r;
        double ts = unpad_now_s();
        if ((rc = trainer_step(t, step, &r, err)))
            return 1;
        r.step_s = unpad_now_s() - ts;
        if (step == t->first_step)
            t->first_step_s = r.step_s;
        trainer_report_step(t, &r, r.nonfinite);
        if (r.nonfinite && (rc = nonfinite(t, &r, outcome, err)))
            return rc;
        t->st.step = step;
        t->st.data_pos += t->step_samples;
        t->cur = t->have_next ? 1 - t->cur : t->cur;
        evaluated_last = 0;
        if (t->evsrc && a->eval_every && step % a->eval_every == 0) {
            if ((rc = evaluate_and_report(t, step, err)))
                return 1;
            evaluated_last = 1;
        }
        int last = step == a->steps || t->stop;
        if (a->save && ((a->save_every && step % a->save_every == 0) || last) && (rc = trainer_checkpoint(t, err)))
            return 1;
        if (t->stop) {
            printf("  stopped by a signal after step %d%s\n", step, a->save ? " (checkpoint written)" : "");
            *outcome = "stopped by signal";
            return dump_final(t, err) ? 1 : 0;
        }
    }
    if (t->evsrc && !evaluated_last && (rc = evaluate_and_report(t, a->steps, err)))
        return 1;
    *outcome = "completed";
    return dump_final(t, err) ? 1 : 0;
}

int trainer_run(trainer *t, const char **outcome, unpad_err *err)
{
    int rc = run_steps(t, outcome, err);
    trainer_prep_discard(t); /* a stopped run's summary counts only the passes it ran */
    return rc;
}
