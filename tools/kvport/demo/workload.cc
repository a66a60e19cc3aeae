// SPDX-License-Identifier: Apache-2.0
#include "demo/workload.h"

#include <fmt/core.h>

namespace kvport::demo {

Status WorkloadOptions::Validate() const {
  struct Range {
    const char* name;
    int lo, hi, min_allowed;
  };
  for (const Range& r :
       {Range{"system prompt tokens", system_prompt_tokens_min, system_prompt_tokens_max, 1},
        Range{"user tokens", user_tokens_min, user_tokens_max, 1},
        Range{"reply tokens", reply_tokens_min, reply_tokens_max, 0}}) {
    if (r.lo < r.min_allowed || r.hi < r.lo) {
      return Status::InvalidArgument(
          fmt::format("workload: {} must be a range {} <= min <= max, got {}..{}", r.name,
                      r.min_allowed, r.lo, r.hi));
    }
  }
  if (system_prompts < 1) return Status::InvalidArgument("workload: system prompts must be >= 1");
  if (live_conversations < 1) {
    return Status::InvalidArgument("workload: live conversations must be >= 1");
  }
  if (max_turns < 1) return Status::InvalidArgument("workload: max turns must be >= 1");
  if (vocab_size < 2) return Status::InvalidArgument("workload: vocabulary size must be >= 2");
  return Status::Ok();
}

Result<ConversationWorkload> ConversationWorkload::Create(const WorkloadOptions& options) {
  KVPORT_RETURN_IF_ERROR(options.Validate());
  return ConversationWorkload(options);
}

ConversationWorkload::ConversationWorkload(const WorkloadOptions& options)
    : options_(options), state_(options.seed) {
  for (int i = 0; i < options_.system_prompts; ++i) {
    std::vector<int32_t> prompt;
    AppendTokens(&prompt,
                 Between(options_.system_prompt_tokens_min, options_.system_prompt_tokens_max));
    system_prompts_.push_back(std::move(prompt));
  }
  for (int i = 0; i < options_.live_conversations; ++i)
    live_.push_back(StartConversation());
}

uint64_t ConversationWorkload::NextRandom() {
  // SplitMix64 (Steele, Lea, Flood 2014): one add and three xor-shift-multiplies per output.
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int ConversationWorkload::Between(int lo, int hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  // The high 64 bits of a 64x64 product: uniform enough for a demo, and without the modulo's
  // bias toward small values when span does not divide 2^64.
  const uint64_t scaled =
      static_cast<uint64_t>((static_cast<unsigned __int128>(NextRandom()) * span) >> 64);
  return lo + static_cast<int>(scaled);
}

void ConversationWorkload::AppendTokens(std::vector<int32_t>* out, int count) {
  for (int i = 0; i < count; ++i)
    out->push_back(Between(0, options_.vocab_size - 1));
}

ConversationWorkload::Conversation ConversationWorkload::StartConversation() {
  Conversation c;
  c.id = next_conversation_id_++;
  c.system_prompt = Between(0, options_.system_prompts - 1);
  c.turns_left = Between(1, options_.max_turns);
  return c;
}

Request ConversationWorkload::Next() {
  Conversation& c = live_[Between(0, static_cast<int>(live_.size()) - 1)];
  if (c.turn == 0) {
    c.history = system_prompts_[c.system_prompt];
  } else {
    // The model's answer to the previous prompt is part of this one.
    AppendTokens(&c.history, Between(options_.reply_tokens_min, options_.reply_tokens_max));
  }
  AppendTokens(&c.history, Between(options_.user_tokens_min, options_.user_tokens_max));
  Request r;
  r.conversation = c.id;
  r.turn = c.turn;
  r.system_prompt = c.system_prompt;
  r.tokens = c.history;
  ++c.turn;
  if (--c.turns_left == 0) c = StartConversation();
  return r;
}

}  // namespace kvport::demo
