/* comm.c — process start-up (MPI launcher or --nproc supervisor) and NCCL collectives. */
#include "comm.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static const char *env_first(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v)
            return v;
    }
    return NULL;
}

static int comm_has_nccl(const comm_t *c)
{
#ifdef UNPAD_HAVE_NCCL
    return c->nccl != NULL;
#else
    (void)c;
    return 0;
#endif
}

int comm_uses_nccl(const comm_t *c) { return comm_has_nccl(c); }

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) { g_stop = sig; }

int comm_spawn(int nproc, int *is_parent, unpad_err *err)
{
    *is_parent = 0;
    if (getenv("UNPAD_RANK"))
        return 0;
    if (nproc == 1) { /* one rank, but through the multi-process path: a real NCCL communicator */
        char id_path[256];
        snprintf(id_path, sizeof id_path, "/tmp/unpad-nccl-id-%d-%ld", (int)getpid(), (long)time(NULL));
        setenv("UNPAD_RANK", "0", 1);
        setenv("UNPAD_LOCAL_RANK", "0", 1);
        setenv("UNPAD_WORLD", "1", 1);
        setenv("UNPAD_NCCL_ID_FILE", id_path, 1);
        return 0;
    }
    if (nproc < 1)
        return 0;
    *is_parent = 1;
    char id_path[256];
    snprintf(id_path, sizeof id_path, "/tmp/unpad-nccl-id-%d-%ld", (int)getpid(), (long)time(NULL));
    unlink(id_path);
    pid_t *pid = calloc((size_t)nproc, sizeof *pid);
    if (!pid) {
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory for %d ranks", nproc);
        return 1;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    /* a supervisor started with SIGCHLD ignored would have its ranks reaped unseen: waitpid could
     * neither name a failed rank nor wait for the others */
    signal(SIGCHLD, SIG_DFL);
    for (int r = 0; r < nproc; r++) {
        pid[r] = fork();
        if (pid[r] < 0) {
            unpad_fail(err, UNPAD_EIO, NULL, 0, "cannot start rank %d: %s", r, strerror(errno));
            for (int k = 0; k < r; k++)
                kill(pid[k], SIGTERM);
            free(pid);
            return 1;
        }
        if (pid[r] == 0) {
            char v[32];
            snprintf(v, sizeof v, "%d", r);
            setenv("UNPAD_RANK", v, 1);
            setenv("UNPAD_LOCAL_RANK", v, 1);
            snprintf(v, sizeof v, "%d", nproc);
            setenv("UNPAD_WORLD", v, 1);
            setenv("UNPAD_NCCL_ID_FILE", id_path, 1);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            free(pid);
            *is_parent = 0; /* set for the supervisor before the fork */
            return 0;       /* the rank goes on in main() */
        }
    }
    /* Supervisor: the first rank to fail stops the others. */
    int alive = nproc, rc = 0, failed = -1;
    while (alive > 0) {
        int status;
        pid_t p = waitpid(-1, &status, 0);
        if (p < 0) {
            if (errno == EINTR && g_stop) { /* a clean stop: every rank checkpoints and exits 0 */
                for (int k = 0; k < nproc; k++)
                    if (pid[k] > 0)
                        kill(pid[k], SIGTERM);
                g_stop = 0;
                continue;
            }
            if (errno == EINTR)
                continue;
            break;
        }
        int r = 0;
        while (r < nproc && pid[r] != p)
            r++;
        if (r == nproc)
            continue;
        pid[r] = -1;
        alive--;
        int bad = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
        if (bad && failed < 0) {
            failed = r;
            if (WIFSIGNALED(status))
                unpad_fail(err, UNPAD_EIO, NULL, 0, "rank %d was killed by signal %d (%s); the other ranks were "
                           "stopped", r, WTERMSIG(status), strsignal(WTERMSIG(status)));
            else
                unpad_fail(err, UNPAD_EIO, NULL, 0, "rank %d failed with exit code %d; the other ranks were stopped",
                           r, WEXITSTATUS(status));
            rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
            for (int k = 0; k < nproc; k++)
                if (pid[k] > 0)
                    kill(pid[k], SIGTERM);
            /* A rank stuck inside a collective may ignore SIGTERM: follow with SIGKILL. */
            sleep(2);
            for (int k = 0; k < nproc; k++)
                if (pid[k] > 0)
                    kill(pid[k], SIGKILL);
        }
    }
    unlink(id_path);
    free(pid);
    return rc;
}

#ifdef UNPAD_HAVE_NCCL
/* Passes the NCCL unique id from rank 0 to the others through a file (written to a temporary
 * name, then renamed, so a reader never sees half of it). */
static int id_through_file(const char *path, int rank, ncclUniqueId *id, unpad_err *err)
{
    if (rank == 0) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        int ok = f && fwrite(id, sizeof *id, 1, f) == 1;
        ok = (f && fclose(f) == 0) && ok;
        if (!ok || rename(tmp, path) != 0)
            return unpad_fail(err, UNPAD_EIO, path, 0, "rank 0 cannot write the NCCL id file: %s", strerror(errno));
        return 0;
    }
    for (int tries = 0; tries < 1200; tries++) { /* 60 s */
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t got = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (got == 1)
                return 0;
        }
        usleep(50000);
    }
    return unpad_fail(err, UNPAD_EIO, path, 0, "rank %d waited 60 s for the NCCL id file from rank 0", rank);
}
#endif

void comm_env(comm_t *c)
{
    memset(c, 0, sizeof *c);
    static const char *RANK[] = {"UNPAD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    static const char *SIZE[] = {"UNPAD_WORLD", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", NULL};
    static const char *LOCAL[] = {"UNPAD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                  "SLURM_LOCALID", NULL};
    const char *r = env_first(RANK), *s = env_first(SIZE), *l = env_first(LOCAL);
    c->rank = r ? atoi(r) : 0;
    c->size = s ? atoi(s) : 1;
    c->local_rank = l ? atoi(l) : c->rank;
    c->launcher = getenv("UNPAD_RANK") ? COMM_NPROC : (r ? COMM_MPI : COMM_SINGLE);
}

int comm_init(comm_t *c, unpad_err *err)
{
    comm_env(c);
    if (c->size < 1 || c->rank < 0 || c->rank >= c->size)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "rank %d of %d from the environment makes no sense", c->rank,
                          c->size);
#ifdef UNPAD_HAVE_MPI
    if (c->launcher == COMM_MPI) {
        mpiCheck(MPI_Init(NULL, NULL));
        mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &c->rank));
        mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &c->size));
    }
#endif
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev < 1) {
        cudaGetLastError();
        return unpad_fail(err, UNPAD_EIO, NULL, 0,
                          "rank %d: no CUDA GPU found (cudaGetDeviceCount: %s%s%s); unpad-train needs an NVIDIA GPU "
                          "and its driver",
                          c->rank, ce != cudaSuccess ? cudaGetErrorName(ce) : "0 devices",
                          ce != cudaSuccess ? ", " : "", ce != cudaSuccess ? cudaGetErrorString(ce) : "");
    }
    c->device = c->local_rank % ndev;
    cudaCheck(cudaSetDevice(c->device));
    if (c->size == 1 && c->launcher == COMM_SINGLE)
        return 0; /* a plain single-GPU run needs no communicator */
#ifdef UNPAD_HAVE_NCCL
    ncclUniqueId id;
    if (c->rank == 0)
        ncclCheck(ncclGetUniqueId(&id));
#ifdef UNPAD_HAVE_MPI
    if (c->launcher == COMM_MPI) {
        mpiCheck(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    } else
#endif
    {
        const char *path = getenv("UNPAD_NCCL_ID_FILE");
        char buf[256];
        if (!path) { /* mpirun without MPI support built in: ranks share the launcher's parent */
            snprintf(buf, sizeof buf, "/tmp/unpad-nccl-id-ppid-%d", (int)getppid());
            path = buf;
        }
        if (id_through_file(path, c->rank, &id, err))
            return UNPAD_EIO;
        if (c->rank == 0 && c->size == 1)
            unlink(path);
    }
    ncclCheck(ncclCommInitRank(&c->nccl, c->size, id, c->rank));
    return 0;
#else
    return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                      "%d ranks need NCCL, and this build has none (rebuild where nccl.h is found)", c->size);
#endif
}

void comm_free(comm_t *c)
{
#ifdef UNPAD_HAVE_NCCL
    if (c->nccl)
        ncclCommDestroy(c->nccl);
    c->nccl = NULL;
#endif
#ifdef UNPAD_HAVE_MPI
    if (c->launcher == COMM_MPI)
        MPI_Finalize();
#endif
}

void comm_allreduce_sum_f32(comm_t *c, float *buf, size_t n, cudaStream_t stream)
{
#ifdef UNPAD_HAVE_NCCL
    if (c->nccl)
        ncclCheck(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, c->nccl, stream));
#else
    (void)c; (void)buf; (void)n; (void)stream;
#endif
}

void comm_allgather_i32(comm_t *c, const int32_t *send, int32_t *recv, size_t count, cudaStream_t stream)
{
    if (c->size == 1 && !comm_has_nccl(c)) {
        if (send != recv)
            cudaCheck(cudaMemcpyAsync(recv, send, count * sizeof *send, cudaMemcpyDeviceToDevice, stream));
        return;
    }
#ifdef UNPAD_HAVE_NCCL
    ncclCheck(ncclAllGather(send, recv, count, ncclInt32, c->nccl, stream));
#endif
}

void comm_exchange_i32(comm_t *c, int32_t *const *send, const int64_t *send_words,
                       int32_t *const *recv, const int64_t *recv_words, cudaStream_t stream)
{
    if (!comm_has_nccl(c))
        return;
#ifdef UNPAD_HAVE_NCCL
    ncclCheck(ncclGroupStart());
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank)
            continue;
        if (send_words[p] > 0)
            ncclCheck(ncclSend(send[p], (size_t)send_words[p], ncclInt32, p, c->nccl, stream));
        if (recv_words[p] > 0)
            ncclCheck(ncclRecv(recv[p], (size_t)recv_words[p], ncclInt32, p, c->nccl, stream));
    }
    ncclCheck(ncclGroupEnd());
#else
    (void)send; (void)send_words; (void)recv; (void)recv_words; (void)stream;
#endif
}
