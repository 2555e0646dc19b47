/* Tests that run themselves again in a child (with another environment)
 * exec /proc/self/exe. Under qemu-user (the arm64 cross tests: make
 * test-arm64) the host cannot exec the guest binary, so when that fails with
 * ENOEXEC and CANDLE_TEST_EMULATOR names the emulator (set by the cross
 * toolchain's CMAKE_CROSSCOMPILING_EMULATOR, with QEMU_LD_PREFIX and QEMU_CPU
 * inherited), the child runs the binary under it. Returns only on failure. */
#ifndef CANDLE_TEST_EXEC_SELF_H
#define CANDLE_TEST_EXEC_SELF_H

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

static inline void test_exec_self(char **argv) {
    execv("/proc/self/exe", argv);
    const char *emu = getenv("CANDLE_TEST_EMULATOR");
    if (errno != ENOEXEC || !emu || !*emu) return;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return;
    self[n] = 0;
    int argc = 0;
    while (argv[argc]) argc++;
    char **a = calloc((size_t)argc + 3, sizeof *a);
    if (!a) return;
    a[0] = (char *)emu;
    a[1] = self;
    for (int i = 1; i < argc; i++) a[i + 1] = argv[i];
    execvp(emu, a);
    free(a);
}

#endif
