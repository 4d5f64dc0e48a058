// Test-only LD_PRELOAD shim (tests/integration/test_horovod_enqueue_race.py). Right after Horovod's
// TensorQueue::AddToTensorQueue releases its lock, the enqueuing thread is held for HOLD_MS, so Horovod's
// background thread completes the collective meanwhile: what a preemption at that instant does, made
// certain. The hold is the fault being injected, not a wait for something.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOLD_MS 200
static const char ENQUEUE[] =
    "_ZN7horovod6common11TensorQueue16AddToTensorQueueERNS0_16TensorTableEntryERNS0_7RequestE";

static int (*real_unlock)(pthread_mutex_t *);
static uintptr_t enqueue_start, enqueue_end;

static void find_enqueue(void) {
  void *symbol = dlsym(RTLD_DEFAULT, ENQUEUE);  // NULL until horovod.mxnet's library is loaded
  Dl_info info;
  const ElfW(Sym) *entry = NULL;
  if (symbol && dladdr1(symbol, &info, (void **)&entry, RTLD_DL_SYMENT) && entry) {
    enqueue_end = (uintptr_t)symbol + entry->st_size;
    enqueue_start = (uintptr_t)symbol;
  }
}

int pthread_mutex_unlock(pthread_mutex_t *mutex) {
  if (!real_unlock) real_unlock = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_unlock");
  int result = real_unlock(mutex);
  uintptr_t caller = (uintptr_t)__builtin_return_address(0);
  if (!enqueue_start) find_enqueue();
  if (enqueue_start && caller >= enqueue_start && caller < enqueue_end) {
    static const char note[] = "hold_after_enqueue: holding the enqueuing thread\n";
    (void)!write(2, note, sizeof note - 1);
    struct timespec hold = {0, HOLD_MS * 1000L * 1000L};
    nanosleep(&hold, NULL);
  }
  return result;
}
