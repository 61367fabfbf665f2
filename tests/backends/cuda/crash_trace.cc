// A fatal signal in a GPU test binary prints the stack (glibc backtrace) before the process dies:
// the GPU machine has no debugger, and `addr2line -e <binary> <offset>` here turns the offsets into
// lines. Linked into the gpu-labelled test binaries.
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

namespace {

void on_fatal(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char header[] = "\n*** fatal signal in a GPU test; backtrace (addr2line -e <binary> -f -C <+offset>):\n";
  (void)!write(2, header, sizeof(header) - 1);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

struct Install {
  Install() {
    void* warm[1];
    backtrace(warm, 1);  // loads libgcc now, not inside the handler
    signal(SIGSEGV, on_fatal);
    signal(SIGBUS, on_fatal);
    signal(SIGFPE, on_fatal);
    signal(SIGABRT, on_fatal);
  }
} install;

}  // namespace
