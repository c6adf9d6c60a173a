// TcpComm against the obvious serial answers: n ranks as n threads of one
// process, each with its own listener and mesh.
#include "comm/tcp_comm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

#include "comm/elements.h"

namespace ringmaster {
namespace {

using Body = std::function<void(TcpComm&)>;

// Runs `body` on `n` connected ranks (threads); fails the test when the
// mesh cannot be built.
void OnRanks(int n, const Body& body, uint64_t session = 42) {
  std::vector<TcpListener> listeners;
  std::vector<TcpPeer> peers;
  for (int r = 0; r < n; ++r) {
    auto l = TcpListener::Open("127.0.0.1");
    ASSERT_TRUE(l.ok()) << l.status();
    peers.push_back({"host" + std::to_string(r / 2),
                     "127.0.0.1:" + std::to_string(l->port())});
    listeners.push_back(std::move(*l));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto comm = TcpComm::Connect(std::move(listeners[r]), r, peers, session,
                                   absl::Seconds(20));
      ASSERT_TRUE(comm.ok()) << comm.status();
      body(**comm);
    });
  }
  for (auto& t : threads) t.join();
}

// Rank r's element i: small integers, exact in every type.
double Value(int r, int64_t i) {
  return static_cast<double>((r + 1) * (i % 7 + 1));
}

TEST(TcpComm, AllReduceMatchesTheSerialSumForUnevenCounts) {
  for (int n : {1, 2, 3, 4}) {
    for (int64_t count : {int64_t{1}, int64_t{5}, int64_t{1000003}}) {
      OnRanks(n, [&](TcpComm& c) {
        std::vector<float> in(count), out(count);
        for (int64_t i = 0; i < count; ++i)
          in[i] = static_cast<float>(Value(c.rank(), i));
        ASSERT_TRUE(
            c.AllReduce(in.data(), out.data(), count, v1::FLOAT32, v1::SUM)
                .ok());
        for (int64_t i = 0; i < count; ++i) {
          double want = 0;
          for (int r = 0; r < n; ++r) want += Value(r, i);
          ASSERT_EQ(out[i], static_cast<float>(want))
              << "n=" << n << " i=" << i;
        }
        // In place, with MAX, on doubles.
        std::vector<double> d(count);
        for (int64_t i = 0; i < count; ++i) d[i] = Value(c.rank(), i);
        ASSERT_TRUE(
            c.AllReduce(nullptr, d.data(), count, v1::FLOAT64, v1::MAX).ok());
        for (int64_t i = 0; i < count; ++i) ASSERT_EQ(d[i], Value(n - 1, i));
      });
    }
  }
}

TEST(TcpComm, SixteenBitFloatsReduceThroughFloat) {
  OnRanks(3, [](TcpComm& c) {
    std::vector<uint16_t> v(33);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = FloatToBf16(static_cast<float>(Value(c.rank(), i)));
    ASSERT_TRUE(c.AllReduce(nullptr, v.data(), 33, v1::BFLOAT16, v1::SUM).ok());
    for (size_t i = 0; i < v.size(); ++i)
      EXPECT_EQ(Bf16ToFloat(v[i]), Value(0, i) + Value(1, i) + Value(2, i));
  });
}

TEST(TcpComm, AllGatherReduceScatterBroadcastReduceAllToAll) {
  const int n = 4;
  const int64_t k = 1001;  // elements per rank block
  OnRanks(n, [&](TcpComm& c) {
    const int me = c.rank();
    // All-gather, out of place and in place.
    std::vector<int32_t> mine(k), all(k * n, -1);
    for (int64_t i = 0; i < k; ++i) mine[i] = me * 10000 + static_cast<int>(i);
    ASSERT_TRUE(c.AllGather(mine.data(), all.data(), k * 4).ok());
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(all[r * k + i], r * 10000 + i);
    std::vector<int32_t> inplace(k * n, -1);
    std::memcpy(&inplace[me * k], mine.data(), k * 4);
    ASSERT_TRUE(c.AllGather(nullptr, inplace.data(), k * 4).ok());
    EXPECT_EQ(inplace, all);

    // Reduce-scatter: block b of the sum lands on rank b.
    std::vector<int64_t> rs_in(k * n), rs_out(k);
    for (int64_t i = 0; i < k * n; ++i) rs_in[i] = (me + 1) * i;
    ASSERT_TRUE(
        c.ReduceScatter(rs_in.data(), rs_out.data(), k, v1::INT64, v1::SUM)
            .ok());
    for (int64_t i = 0; i < k; ++i)
      ASSERT_EQ(rs_out[i], 10 * (me * k + i));  // (1+2+3+4) * index
    std::vector<int64_t> rs_ip = rs_in;
    ASSERT_TRUE(
        c.ReduceScatter(nullptr, rs_ip.data(), k, v1::INT64, v1::SUM).ok());
    for (int64_t i = 0; i < k; ++i) ASSERT_EQ(rs_ip[i], rs_out[i]);

    // Broadcast from rank 2.
    std::vector<char> b(70001, me == 2 ? 'x' : '.');
    ASSERT_TRUE(c.Broadcast(b.data(), static_cast<int64_t>(b.size()), 2).ok());
    EXPECT_EQ(std::string(b.begin(), b.end()), std::string(b.size(), 'x'));

    // Reduce (product) to rank 1.
    std::vector<int32_t> p(k, me + 1), pr(k, 0);
    ASSERT_TRUE(c.Reduce(p.data(), pr.data(), k, v1::INT32, v1::PROD, 1).ok());
    if (me == 1) {
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(pr[i], 24);
    }

    // All-to-all: block j of rank r goes to rank j's block r.
    std::vector<int32_t> a2a(k * n), got(k * n, -1);
    for (int j = 0; j < n; ++j)
      for (int64_t i = 0; i < k; ++i) a2a[j * k + i] = me * 100 + j;
    ASSERT_TRUE(c.AllToAll(a2a.data(), got.data(), k * 4).ok());
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(got[r * k + i], r * 100 + me);
    EXPECT_TRUE(c.Barrier().ok());
  });
}

TEST(TcpComm, OppositeLargeSendsDoNotDeadlock) {
  // 64 MiB each way between two ranks, far beyond the socket buffers.
  OnRanks(2, [](TcpComm& c) {
    const int64_t bytes = 64 << 20;
    std::vector<char> out(bytes, static_cast<char>('a' + c.rank())), in(bytes);
    SendOp s{1 - c.rank(), out.data(), bytes};
    RecvOp r{1 - c.rank(), in.data(), bytes};
    ASSERT_TRUE(c.Exchange({&s, 1}, {&r, 1}).ok());
    EXPECT_EQ(in[0], 'a' + 1 - c.rank());
    EXPECT_EQ(in[bytes - 1], 'a' + 1 - c.rank());
  });
}

TEST(TcpComm, BackgroundAllReducesCompleteInOrderWhileTheCallerComputes) {
  OnRanks(3, [](TcpComm& c) {
    std::vector<std::vector<float>> bufs(5, std::vector<float>(100000));
    std::vector<std::unique_ptr<HostComm::Request>> reqs;
    for (size_t b = 0; b < bufs.size(); ++b) {
      std::fill(bufs[b].begin(), bufs[b].end(),
                static_cast<float>(b + c.rank()));
      auto req = c.StartAllReduce(bufs[b].data(), 100000, v1::FLOAT32, v1::SUM);
      ASSERT_TRUE(req.ok());
      reqs.push_back(std::move(*req));
    }
    // Blocking calls on the other channel meanwhile.
    ASSERT_TRUE(c.Barrier().ok());
    for (auto& r : reqs) ASSERT_TRUE(r->Wait().ok());
    for (size_t b = 0; b < bufs.size(); ++b)
      EXPECT_EQ(bufs[b][99999], static_cast<float>(3 * b + 3));
  });
}

TEST(TcpComm, SplitPrefixAndRanksOnHost) {
  OnRanks(4, [](TcpComm& c) {
    // Hosts are "host0" for ranks 0-1 and "host1" for 2-3.
    auto local = c.RanksOnHost();
    ASSERT_TRUE(local.ok());
    EXPECT_EQ(*local, 2);
    auto sub = c.SplitPrefix(c.rank() < 3);
    ASSERT_TRUE(sub.ok()) << sub.status();
    if (c.rank() == 3) {
      EXPECT_EQ(*sub, nullptr);
    } else {
      ASSERT_NE(*sub, nullptr);
      EXPECT_EQ((*sub)->size(), 3);
      int64_t v = 1;
      ASSERT_TRUE((*sub)->AllReduce(nullptr, &v, 1, v1::INT64, v1::SUM).ok());
      EXPECT_EQ(v, 3);
    }
    ASSERT_TRUE(c.Barrier().ok());
  });
}

TEST(TcpComm, APeerThatLeavesIsAnErrorNotAHang) {
  OnRanks(2, [](TcpComm& c) {
    if (c.rank() == 1) return;  // its mesh closes when the comm is destroyed
    std::vector<float> v(1000, 1.f);
    absl::Status s = c.AllReduce(nullptr, v.data(), 1000, v1::FLOAT32, v1::SUM);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s;
  });
}

TEST(TcpComm, ConnectionsFromAnotherSessionAreRefused) {
  // Rank 1 dials with a different session: rank 0 never accepts it and
  // reports the missing rank at its deadline.
  auto l0 = TcpListener::Open("127.0.0.1");
  auto l1 = TcpListener::Open("127.0.0.1");
  ASSERT_TRUE(l0.ok() && l1.ok());
  std::vector<TcpPeer> peers = {
      {"a", "127.0.0.1:" + std::to_string(l0->port())},
      {"b", "127.0.0.1:" + std::to_string(l1->port())}};
  std::thread stray([&] {
    (void)TcpComm::Connect(std::move(*l1), 1, peers, 7, absl::Seconds(2));
  });
  auto comm = TcpComm::Connect(std::move(*l0), 0, peers, 8, absl::Seconds(2));
  stray.join();
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.status().message().find("ranks 1 did not connect"),
            std::string::npos)
      << comm.status();
}

}  // namespace
}  // namespace ringmaster
