// For the host backend's tests: n connected ranks as n threads of one
// process over TcpComm.
#ifndef RINGMASTER_BACKENDS_HOST_TEST_RANKS_H_
#define RINGMASTER_BACKENDS_HOST_TEST_RANKS_H_

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/tcp_comm.h"

namespace ringmaster::testing {

// Runs `body` on `n` connected ranks (threads).
inline void OnRanks(int n, const std::function<void(HostComm&)>& body) {
  std::vector<TcpListener> listeners;
  std::vector<TcpPeer> peers;
  for (int r = 0; r < n; ++r) {
    auto l = TcpListener::Open("127.0.0.1");
    ASSERT_TRUE(l.ok()) << l.status();
    peers.push_back({"host", "127.0.0.1:" + std::to_string(l->port())});
    listeners.push_back(std::move(*l));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto comm = TcpComm::Connect(std::move(listeners[r]), r, peers, 7,
                                   absl::Seconds(20));
      ASSERT_TRUE(comm.ok()) << comm.status();
      body(**comm);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace ringmaster::testing

#endif  // RINGMASTER_BACKENDS_HOST_TEST_RANKS_H_
