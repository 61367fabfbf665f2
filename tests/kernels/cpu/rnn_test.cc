// kernels/cpu lstm / gru (the fused kernels, rnn.cc) against their reference twins on every target:
// hidden sizes 1, lanes +- 1 and past one 32-unit block, batch 0 / 1 / 5, T 0 / 1 / 7, every
// direction, sequence_lens with empty rows, peepholes, clip, input_forget, linear_before_reset and
// every activation; 1 / 2 / 3 threads bitwise equal.
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/reference/ops.h"
#include "tests/kernels/cpu/test_util.h"

namespace ember::kernels::cpu_test {
namespace {

namespace ref = ::ember::kernels::reference;

struct Config {
  bool lstm;
  int64_t t, b, in, h;
  RnnDirection dir = RnnDirection::Forward;
  bool bias = true, lens = false, states = true, peep = false;
  float clip = 0.0f;
  bool input_forget = false, lbr = false;
  RnnActivation act0 = RnnActivation::Sigmoid, act1 = RnnActivation::Tanh;
};

// Runs `fn` with 1, 2 and 3 threads (a scratch from `scratch`, deliberately misaligned); every
// output must agree bit for bit; returns the single-threaded outputs.
std::vector<Tensor> Run(const Config& c, KernelFn fn, ScratchFn scratch, const OpAttrs& attrs,
                        const std::vector<TensorView>& in) {
  const OpInfo* info = find_op_info(c.lstm ? OpCode::Lstm : OpCode::Gru);
  std::vector<TensorView> shapes(info->outputs);
  ErrorContext ectx;
  EXPECT_TRUE(info->shape(attrs, in.data(), in.size(), shapes.data(), shapes.size(), Span<const int64_t>(), &ectx)
                  .is_ok())
      << ectx.message;
  std::vector<Tensor> first;
  for (int threads : {1, 2, 3}) {
    std::vector<Tensor> outs;
    for (const TensorView& v : shapes) outs.emplace_back(v.dtype, std::vector<int64_t>(v.dims, v.dims + v.rank));
    std::vector<TensorView> views;
    for (Tensor& t : outs) {
      std::memset(t.view.data, 0xA5, t.nbytes());  // a kernel that skips elements cannot pass
      views.push_back(t.view);
    }
    KernelContext ctx;
    static FixedThreadPool pool2(2);
    ctx.pool = threads == 1 ? nullptr : threads == 2 ? static_cast<ThreadPool*>(&pool2) : Pool(3);
    std::vector<uint8_t> buf(scratch(attrs, in.data(), in.size(), views.data(), views.size(), threads) + 1, 0xFF);
    ctx.scratch = Span<uint8_t>(buf.data() + 1, buf.size() - 1);
    fn(ctx, attrs, in.data(), in.size(), views.data(), views.size());
    if (threads == 1) {
      first = std::move(outs);
    } else {
      for (size_t o = 0; o < first.size(); ++o) {
        EXPECT_TRUE(BytesEqual(outs[o], first[o])) << "output " << o << ": " << threads << " threads differ from 1";
      }
    }
  }
  return first;
}

void Check(const Config& c, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << (c.lstm ? "lstm" : "gru") << " T " << c.t << " B " << c.b << " I " << c.in
                                    << " H " << c.h << " dir " << int(c.dir) << " act " << int(c.act0) << "/"
                                    << int(c.act1));
  const int64_t g = c.lstm ? 4 : 3, d = c.dir == RnnDirection::Bidirectional ? 2 : 1;
  OpAttrs a;
  a.kind = AttrKind::Rnn;
  a.rnn_direction = c.dir;
  a.hidden_size = static_cast<int32_t>(c.h);
  const int per = c.lstm ? 3 : 2;
  a.rnn_act_count = static_cast<uint8_t>(per * d);
  for (int k = 0; k < a.rnn_act_count; ++k) {
    const int role = k % per;  // f, g(, h)
    a.rnn_act[k] = role == 0 ? c.act0 : c.act1;
    a.rnn_alpha[k] = 0.3f + 0.1f * k;
    a.rnn_beta[k] = 0.2f;
  }
  a.rnn_clip = c.clip;
  a.input_forget = c.input_forget;
  a.linear_before_reset = c.lbr;
  Tensor x = Random({c.t, c.b, c.in}, seed), w = Random({d, g * c.h, c.in}, seed + 1, -0.5f, 0.5f);
  Tensor r = Random({d, g * c.h, c.h}, seed + 2, -0.5f, 0.5f), bias = Random({d, 2 * g * c.h}, seed + 3);
  Tensor h0 = Random({d, c.b, c.h}, seed + 4), c0 = Random({d, c.b, c.h}, seed + 5);
  Tensor p = Random({d, 3 * c.h}, seed + 6);
  Tensor lens(ScalarType::I32, {c.b});
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < c.b; ++i) lens.view.data_as<int32_t>()[i] = static_cast<int32_t>(rng() % (c.t + 1));
  TensorView absent;
  std::vector<TensorView> in = {x.view, w.view, r.view, c.bias ? bias.view : absent, c.lens ? lens.view : absent,
                                c.states ? h0.view : absent};
  if (c.lstm) {
    in.push_back(c.states ? c0.view : absent);
    in.push_back(c.peep ? p.view : absent);
  }
  const std::vector<Tensor> got = Run(c, c.lstm ? cpu::lstm : cpu::gru, c.lstm ? cpu::lstm_scratch : cpu::gru_scratch,
                                      a, in);
  const std::vector<Tensor> want = Run(c, c.lstm ? ref::lstm : ref::gru, ref::rnn_scratch, a, in);
  for (size_t o = 0; o < got.size(); ++o) {
    EXPECT_TRUE(AllClose(got[o], want[o], {2e-5f, 2e-4f})) << "output " << o;
  }
}

class RnnTest : public TargetTest {};
EMBER_INSTANTIATE_TARGETS(RnnTest);

TEST_P(RnnTest, SizesAndDirections) {
  uint32_t seed = 1;
  for (bool lstm : {true, false}) {
    for (int64_t h : {1, 3, 4, 7, 8, 9, 15, 16, 17, 33, 70}) {
      for (RnnDirection dir : {RnnDirection::Forward, RnnDirection::Reverse, RnnDirection::Bidirectional}) {
        Config c{lstm, 4, 3, 5, h, dir};
        c.lens = h % 2 == 1;
        c.states = h != 4;
        c.bias = h != 8;
        Check(c, seed++);
      }
    }
    Check(Config{lstm, 0, 2, 3, 5}, seed++);  // T = 0: Y empty, the final state is the initial one
    Check(Config{lstm, 3, 0, 3, 5}, seed++);  // B = 0
    Check(Config{lstm, 1, 1, 1, 1}, seed++);
    Check(Config{lstm, 7, 5, 40, 64, RnnDirection::Bidirectional}, seed++);  // several blocks: threads split
  }
}

TEST_P(RnnTest, Modes) {
  uint32_t seed = 100;
  Config peep{true, 5, 3, 4, 17, RnnDirection::Bidirectional};
  peep.peep = true;
  peep.lens = true;
  peep.clip = 0.7f;
  Check(peep, seed++);
  peep.input_forget = true;
  Check(peep, seed++);
  for (bool lbr : {false, true}) {
    Config gru{false, 6, 4, 5, 40, RnnDirection::Bidirectional};
    gru.lbr = lbr;
    gru.lens = true;
    gru.clip = 1.5f;
    Check(gru, seed++);
  }
}

TEST_P(RnnTest, EveryActivation) {
  uint32_t seed = 200;
  for (int k = 1; k <= 11; ++k) {
    const RnnActivation act = static_cast<RnnActivation>(k);
    for (bool lstm : {true, false}) {
      Config f{lstm, 3, 2, 3, 9, RnnDirection::Bidirectional};
      f.act0 = act;
      f.clip = 3.0f;  // keeps unbounded gates (Relu, Affine, ...) finite
      Check(f, seed++);
      Config g = f;
      g.act0 = RnnActivation::Sigmoid;
      g.act1 = act;
      Check(g, seed++);
    }
  }
}

}  // namespace
}  // namespace ember::kernels::cpu_test
