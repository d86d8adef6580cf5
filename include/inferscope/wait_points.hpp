// The library functions where one thread hands work to another: the calls that wait (Queue.get, Condition.wait,
// Future.result, a DataLoader's __next__) and the calls that wake a waiter (Queue.put, Event.set, notify). The
// Python collector traces them in its default mode, where the standard library and installed packages are not
// traced otherwise (they cost little: a thread calls them once per item handed over, and the call itself waits),
// and the analyzer reads them back to say where the step thread waited and who woke it. One list, shared by the
// writer and the reader, like counter_names.hpp.
#pragma once

#include <cstdint>
#include <string_view>

namespace inferscope {

/// What waiting in a wait point means, as the report words it.
enum class WaitKind : uint8_t {
  kQueue = 0,       ///< a queue of items: the step waits for a producer, or a producer for a consumer
  kLock = 1,        ///< a lock or semaphore held by another thread
  kCondition = 2,   ///< a condition or event another thread signals
  kJoin = 3,        ///< a thread or process to finish
  kFuture = 4,      ///< the result of work submitted to a pool
  kDataLoader = 5,  ///< a torch DataLoader's next batch
  kPipe = 6,        ///< a pipe or connection between processes
  kEventLoop = 7,   ///< an event loop waiting for I/O or its next callback
  kLogging = 8,     ///< a logging handler (its lock, or its output)
  kSleep = 9,       ///< a timed sleep
  kSubprocess = 10, ///< a child program
};

/// A wait point may block its caller (kWait), wake another thread's wait (kWake), or both (Queue.put blocks on a
/// full queue and wakes a consumer).
enum WaitRole : uint8_t { kWaitRoleWait = 1, kWaitRoleWake = 2 };

struct WaitPoint {
  std::string_view module;    ///< dotted module name ("multiprocessing.queues")
  std::string_view qualname;  ///< the function's __qualname__
  uint8_t roles;              ///< WaitRole bits
  WaitKind kind;
};

inline constexpr WaitPoint kWaitPoints[] = {
    {"queue", "Queue.get", kWaitRoleWait, WaitKind::kQueue},
    {"queue", "Queue.put", kWaitRoleWait | kWaitRoleWake, WaitKind::kQueue},
    {"threading", "Condition.wait", kWaitRoleWait, WaitKind::kCondition},
    {"threading", "Condition.wait_for", kWaitRoleWait, WaitKind::kCondition},
    {"threading", "Condition.notify", kWaitRoleWake, WaitKind::kCondition},
    {"threading", "Condition.notify_all", kWaitRoleWake, WaitKind::kCondition},
    {"threading", "Event.wait", kWaitRoleWait, WaitKind::kCondition},
    {"threading", "Event.set", kWaitRoleWake, WaitKind::kCondition},
    {"threading", "Thread.join", kWaitRoleWait, WaitKind::kJoin},
    {"threading", "Semaphore.acquire", kWaitRoleWait, WaitKind::kLock},
    {"threading", "Semaphore.release", kWaitRoleWake, WaitKind::kLock},
    {"threading", "BoundedSemaphore.release", kWaitRoleWake, WaitKind::kLock},
    {"threading", "Barrier.wait", kWaitRoleWait | kWaitRoleWake, WaitKind::kCondition},
    {"multiprocessing.queues", "Queue.get", kWaitRoleWait, WaitKind::kPipe},
    {"multiprocessing.queues", "Queue.put", kWaitRoleWake, WaitKind::kPipe},
    {"multiprocessing.queues", "SimpleQueue.get", kWaitRoleWait, WaitKind::kPipe},
    {"multiprocessing.queues", "SimpleQueue.put", kWaitRoleWake, WaitKind::kPipe},
    {"multiprocessing.queues", "JoinableQueue.join", kWaitRoleWait, WaitKind::kPipe},
    {"multiprocessing.connection", "_ConnectionBase.recv", kWaitRoleWait, WaitKind::kPipe},
    {"multiprocessing.connection", "_ConnectionBase.recv_bytes", kWaitRoleWait, WaitKind::kPipe},
    {"multiprocessing.connection", "_ConnectionBase.poll", kWaitRoleWait, WaitKind::kPipe},
    {"multiprocessing.connection", "_ConnectionBase.send", kWaitRoleWake, WaitKind::kPipe},
    {"multiprocessing.connection", "wait", kWaitRoleWait, WaitKind::kPipe},
    {"multiprocessing.pool", "ApplyResult.get", kWaitRoleWait, WaitKind::kFuture},
    {"multiprocessing.pool", "ApplyResult.wait", kWaitRoleWait, WaitKind::kFuture},
    {"multiprocessing.pool", "IMapIterator.next", kWaitRoleWait, WaitKind::kFuture},
    {"concurrent.futures._base", "Future.result", kWaitRoleWait, WaitKind::kFuture},
    {"concurrent.futures._base", "Future.set_result", kWaitRoleWake, WaitKind::kFuture},
    {"concurrent.futures._base", "wait", kWaitRoleWait, WaitKind::kFuture},
    {"concurrent.futures._base", "as_completed", kWaitRoleWait, WaitKind::kFuture},
    {"concurrent.futures._base", "Executor.map.<locals>.result_iterator", kWaitRoleWait, WaitKind::kFuture},
    {"torch.utils.data.dataloader", "_BaseDataLoaderIter.__next__", kWaitRoleWait, WaitKind::kDataLoader},
    {"torch.utils.data.dataloader", "_MultiProcessingDataLoaderIter._get_data", kWaitRoleWait, WaitKind::kDataLoader},
    {"torch.utils.data.dataloader", "_MultiProcessingDataLoaderIter._try_get_data", kWaitRoleWait, WaitKind::kDataLoader},
    {"torch.utils.data.dataloader", "_SingleProcessDataLoaderIter._next_data", kWaitRoleWait, WaitKind::kDataLoader},
    {"asyncio.queues", "Queue.get", kWaitRoleWait, WaitKind::kQueue},
    {"asyncio.queues", "Queue.put", kWaitRoleWait | kWaitRoleWake, WaitKind::kQueue},
    {"asyncio.tasks", "sleep", kWaitRoleWait, WaitKind::kSleep},
    {"asyncio.tasks", "wait_for", kWaitRoleWait, WaitKind::kFuture},
    {"asyncio.tasks", "wait", kWaitRoleWait, WaitKind::kFuture},
    {"asyncio.base_events", "BaseEventLoop.call_soon_threadsafe", kWaitRoleWake, WaitKind::kEventLoop},
    {"selectors", "EpollSelector.select", kWaitRoleWait, WaitKind::kEventLoop},
    {"selectors", "_PollLikeSelector.select", kWaitRoleWait, WaitKind::kEventLoop},
    {"selectors", "SelectSelector.select", kWaitRoleWait, WaitKind::kEventLoop},
    {"logging", "Handler.handle", kWaitRoleWait, WaitKind::kLogging},
    {"logging", "Handler.acquire", kWaitRoleWait, WaitKind::kLogging},
    {"logging", "Handler.release", kWaitRoleWake, WaitKind::kLogging},
    {"logging", "StreamHandler.emit", kWaitRoleWait, WaitKind::kLogging},
    {"logging", "FileHandler.emit", kWaitRoleWait, WaitKind::kLogging},
    {"subprocess", "Popen.wait", kWaitRoleWait, WaitKind::kSubprocess},
    {"subprocess", "Popen.communicate", kWaitRoleWait, WaitKind::kSubprocess},
};

/// The wait point `module`.`qualname` names, or nullptr.
constexpr const WaitPoint* find_wait_point(std::string_view module, std::string_view qualname) {
  for (const WaitPoint& w : kWaitPoints)
    if (w.module == module && w.qualname == qualname) return &w;
  return nullptr;
}

/// Whether `file` is the source of `module`: it ends in "/<module as a path>.py" or "/<module as a path>/__init__.py"
/// (the analyzer has a code object's file, not its module).
constexpr bool file_is_module(std::string_view file, std::string_view module) {
  auto ends_with_path = [&](std::string_view tail) {
    // file ends with '/' + module-with-slashes + tail
    const size_t need = 1 + module.size() + tail.size();
    if (file.size() < need) return false;
    const size_t at = file.size() - need;
    if (file[at] != '/') return false;
    for (size_t i = 0; i < module.size(); ++i) {
      const char want = module[i] == '.' ? '/' : module[i];
      if (file[at + 1 + i] != want) return false;
    }
    return file.substr(file.size() - tail.size()) == tail;
  };
  return ends_with_path(".py") || ends_with_path("/__init__.py");
}

/// The wait point a traced code object is, from its qualified name and file, or nullptr.
constexpr const WaitPoint* wait_point_of_code(std::string_view qualname, std::string_view file) {
  for (const WaitPoint& w : kWaitPoints)
    if (w.qualname == qualname && file_is_module(file, w.module)) return &w;
  return nullptr;
}

}  // namespace inferscope
