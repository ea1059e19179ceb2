#include "sim/core/signal_cleanup.hpp"

#include <atomic>
#include <csignal>
#include <cstring>
#include <pthread.h>
#include <unistd.h>

#include "sim/core/input_error.hpp"

namespace epsim {

namespace {

constexpr int kSlots = 256;
constexpr std::size_t kMaxPathBytes = 4096;

enum SlotState : int { kFree = 0, kFilling = 1, kArmed = 2 };

// Static storage only: the handler touches nothing that could be half-built or freed.
struct Slot {
  std::atomic<int> state{kFree};
  bool is_folder = false;
  char path[kMaxPathBytes];
};
Slot g_slots[kSlots];

extern "C" void on_signal(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_slots[i].state.load() == kArmed && !g_slots[i].is_folder) ::unlink(g_slots[i].path);
  // Folders registered later sit inside those registered earlier: remove them in reverse.
  for (int i = kSlots - 1; i >= 0; --i)
    if (g_slots[i].state.load() == kArmed && g_slots[i].is_folder) ::rmdir(g_slots[i].path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

int add(const std::string& path, bool is_folder) {
  if (path.empty() || path.size() >= kMaxPathBytes)
    throw InputError(path, "", "output path is too long (at most " + std::to_string(kMaxPathBytes - 1) + " bytes)");
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kFilling)) continue;
    g_slots[i].is_folder = is_folder;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(kArmed);
    return i;
  }
  throw InputError(path, "", "too many output files open at once (at most " + std::to_string(kSlots) + ")");
}

}  // namespace

void SignalCleanup::install() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&action.sa_mask, sig);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &action, nullptr);
  std::signal(SIGXFSZ, SIG_IGN);
}

int SignalCleanup::add_file(const std::string& path) { return add(path, false); }
int SignalCleanup::add_folder(const std::string& path) { return add(path, true); }

void SignalCleanup::release(int slot) {
  if (slot >= 0 && slot < kSlots) g_slots[slot].state.store(kFree);
}

SignalCleanup::Defer::Defer() {
  sigset_t block;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &saved_);
}

SignalCleanup::Defer::~Defer() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }

int SignalCleanup::in_use() {
  int n = 0;
  for (const Slot& s : g_slots) n += s.state.load() != kFree;
  return n;
}

}  // namespace epsim
