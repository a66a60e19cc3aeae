// SPDX-License-Identifier: Apache-2.0
// ConversationWorkload: an LLM-serving-shaped stream of prompts for `kvport demo`.
//
// A handful of system prompts is shared by many conversations; each conversation grows turn by
// turn (its previous prompt, the model's reply, then the next user message), so consecutive
// prompts of a conversation share everything but their tail, and conversations with the same
// system prompt share its leading chunks. Several conversations are live at once and take turns
// in a random order, which is what a server sees from many users.
//
// The stream is a pure function of the options (seed included): the same options give the same
// prompts on every run, machine and compiler (the generator is SplitMix64, not <random>'s
// implementation-defined distributions).
#pragma once

#include <cstdint>
#include <vector>

#include "kvport/status.h"

namespace kvport::demo {

struct WorkloadOptions {
  uint64_t seed = 1;
  int system_prompts = 4;
  int system_prompt_tokens_min = 600;
  int system_prompt_tokens_max = 1400;
  int live_conversations = 8;  // conversations taking turns at any moment
  int max_turns = 6;           // a conversation ends after 1..max_turns turns (random)
  int user_tokens_min = 32;
  int user_tokens_max = 400;
  int reply_tokens_min = 32;
  int reply_tokens_max = 300;
  int32_t vocab_size = 128256;  // Llama-3's vocabulary

  // InvalidArgument naming the first field out of range (a minimum above its maximum, ...).
  Status Validate() const;
};

struct Request {
  uint64_t conversation = 0;  // numbered from 0 in order of first appearance
  int turn = 0;               // 0 for a conversation's first prompt
  int system_prompt = 0;      // which shared system prompt it starts with
  std::vector<int32_t> tokens;
};

class ConversationWorkload {
 public:
  // InvalidArgument when the options do not validate.
  static Result<ConversationWorkload> Create(const WorkloadOptions& options);

  // The next prompt.
  Request Next();

  const std::vector<int32_t>& system_prompt(int index) const { return system_prompts_[index]; }

 private:
  struct Conversation {
    uint64_t id = 0;
    int system_prompt = 0;
    int turns_left = 0;
    int turn = 0;
    std::vector<int32_t> history;  // the last prompt sent (empty before the first turn)
  };

  explicit ConversationWorkload(const WorkloadOptions& options);
  uint64_t NextRandom();
  // Uniform in [lo, hi].
  int Between(int lo, int hi);
  void AppendTokens(std::vector<int32_t>* out, int count);
  Conversation StartConversation();

  WorkloadOptions options_;
  uint64_t state_;
  uint64_t next_conversation_id_ = 0;
  std::vector<std::vector<int32_t>> system_prompts_;
  std::vector<Conversation> live_;
};

}  // namespace kvport::demo
