/* For tests of the quantized kernels: where the AVX512-VNNI kernels run,
 * the whole test once more in a child process with CANDLE_QUANT_NO_VNNI=1
 * (the AVX2 kernels through the same dispatch); in that child, a check that
 * the switch took. Call it from main, after the checks. */
#ifndef CANDLE_TEST_VNNI_RERUN_H
#define CANDLE_TEST_VNNI_RERUN_H

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cpu/quant/x86/quant-x86-impl.h"
#include "exec-self.h"
#include "test.h"

static inline void rerun_without_vnni(char **argv) {
    const char *nv = getenv("CANDLE_QUANT_NO_VNNI");
    if (nv && *nv && *nv != '0') {
        CHECK_MSG(!candle_quant_uses_vnni(), "CANDLE_QUANT_NO_VNNI=1 left the VNNI kernels on");
        return;
    }
    if (!candle_quant_uses_vnni()) return;
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("CANDLE_QUANT_NO_VNNI", "1", 1);
        test_exec_self(argv);
        _exit(127);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "%s: the run with CANDLE_QUANT_NO_VNNI=1 failed (status %d)", argv[0], st);
}

#endif
