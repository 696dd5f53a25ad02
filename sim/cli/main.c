/* main.c — the `unpad` command. Each subcommand lives in sim/cli/cmd_<name>.c and defines
 * `int cmd_<name>(int argc, char **argv)` and `const char cmd_<name>_what[]`; the Makefile lists
 * them in commands.h from the file names. */
#include <stdio.h>
#include <string.h>

#include "version.h"

#define COMMAND(name) int cmd_##name(int, char **); extern const char cmd_##name##_what[];
#include "commands.h"
#undef COMMAND

static const struct { const char *name; int (*fn)(int, char **); const char *what; } CMDS[] = {
#define COMMAND(name) {#name, cmd_##name, cmd_##name##_what},
#include "commands.h"
#undef COMMAND
};

static void usage(FILE *f)
{
    fprintf(f, "usage: unpad COMMAND [options]   (unpad COMMAND --help for each)\n"
               "       unpad --version           version and the git commit of this build\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof CMDS / sizeof CMDS[0]; i++)
        fprintf(f, "  %-10s %s\n", CMDS[i].name, CMDS[i].what);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        char v[128];
        unpad_version_string(v, sizeof v);
        printf("%s\n", v);
        return 0;
    }
    for (size_t i = 0; i < sizeof CMDS / sizeof CMDS[0]; i++)
        if (!strcmp(argv[1], CMDS[i].name))
            return CMDS[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "unpad: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
