/* LD_PRELOAD shim for tests: logs every open of a file under /opt/ml/input/data/ (the channels), one line per open
 * "<OMPI_COMM_WORLD_RANK or -> <pid> <path>" appended to $OPEN_LOG. Covers Python's and C/C++ code's opens alike
 * (open, openat and their 64-bit and fortified forms, fopen): MXNet reads images in C++, json in Python.
 * Only an observer: every call goes on to libc's own function with its arguments unchanged. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHANNELS "/opt/ml/input/data/"

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*open2_fn)(const char *, int);
typedef int (*openat2_fn)(int, const char *, int);
typedef FILE *(*fopen_fn)(const char *, const char *);

static void note(const char *path) {
    const char *log = getenv("OPEN_LOG");
    if (!log || !path || strncmp(path, CHANNELS, sizeof(CHANNELS) - 1) != 0) return;
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    char line[4400];
    int n = snprintf(line, sizeof line, "%s %d %s\n", rank ? rank : "-", (int)getpid(), path);
    if (n <= 0 || n >= (int)sizeof line) return;
    static open_fn real_open;
    if (!real_open) real_open = (open_fn)dlsym(RTLD_NEXT, "open");
    int fd = real_open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t written = write(fd, line, (size_t)n); /* one write of one line: O_APPEND keeps lines whole */
    (void)written;
    close(fd);
}

static mode_t mode_arg(int flags, va_list args) {
    return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(args, int) : 0;
}

#define OPEN_LIKE(name)                                                  \
    int name(const char *path, int flags, ...) {                        \
        static open_fn real;                                            \
        if (!real) real = (open_fn)dlsym(RTLD_NEXT, #name);             \
        va_list args;                                                   \
        va_start(args, flags);                                          \
        mode_t mode = mode_arg(flags, args);                            \
        va_end(args);                                                   \
        note(path);                                                     \
        return real(path, flags, mode);                                 \
    }

#define OPENAT_LIKE(name)                                                \
    int name(int dirfd, const char *path, int flags, ...) {             \
        static openat_fn real;                                          \
        if (!real) real = (openat_fn)dlsym(RTLD_NEXT, #name);           \
        va_list args;                                                   \
        va_start(args, flags);                                          \
        mode_t mode = mode_arg(flags, args);                            \
        va_end(args);                                                   \
        note(path);                                                     \
        return real(dirfd, path, flags, mode);                          \
    }

#define OPEN2_LIKE(name)                                                 \
    int name(const char *path, int flags) {                             \
        static open2_fn real;                                           \
        if (!real) real = (open2_fn)dlsym(RTLD_NEXT, #name);            \
        note(path);                                                     \
        return real(path, flags);                                       \
    }

#define OPENAT2_LIKE(name)                                               \
    int name(int dirfd, const char *path, int flags) {                  \
        static openat2_fn real;                                         \
        if (!real) real = (openat2_fn)dlsym(RTLD_NEXT, #name);          \
        note(path);                                                     \
        return real(dirfd, path, flags);                                \
    }

#define FOPEN_LIKE(name)                                                 \
    FILE *name(const char *path, const char *mode) {                    \
        static fopen_fn real;                                           \
        if (!real) real = (fopen_fn)dlsym(RTLD_NEXT, #name);            \
        note(path);                                                     \
        return real(path, mode);                                        \
    }

OPEN_LIKE(open)
OPEN_LIKE(open64)
OPENAT_LIKE(openat)
OPENAT_LIKE(openat64)
OPEN2_LIKE(__open_2)
OPEN2_LIKE(__open64_2)
OPENAT2_LIKE(__openat_2)
OPENAT2_LIKE(__openat64_2)
FOPEN_LIKE(fopen)
FOPEN_LIKE(fopen64)
