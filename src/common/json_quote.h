// JSON string literals for the few places that write JSON by hand (doctor, config check, stat,
// bench reports): one quoting rule for all of them.
#pragma once

#include <string>
#include <string_view>

namespace kvport {

// `text` as a JSON string literal with its quotes: '"' and '\' are escaped, \n \r \t use their
// short escapes, other control bytes \u00XX; every other byte (UTF-8 included) passes through.
std::string JsonQuote(std::string_view text);

}  // namespace kvport
