#include "cli/fleet_session.h"

#include <iostream>

#include "cli/commands.h"
#include "report/json/fleet_json.h"
#include "util/terminal_text.h"

namespace memtrace {

void print_unreadable(const UnreadableInput& input) {
  std::cerr << "memtrace: " << terminal_safe(input.path) << ": " << terminal_safe(input.error) << '\n';
}

nlohmann::json fleet_document(const FleetView& view, const std::vector<UnreadableInput>& unreadable) {
  nlohmann::json document = fleet_json(view);
  nlohmann::json inputs = nlohmann::json::array();
  for (const UnreadableInput& input : unreadable) inputs.push_back({{"trace", input.path}, {"error", input.error}});
  document["unreadable"] = inputs;
  return document;
}

void print_json_document(const nlohmann::json& document) {
  std::cout << json_terminal_safe(document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) << '\n';
}

int fleet_exit_status(const std::vector<UnreadableInput>& unreadable) {
  return unreadable.empty() ? kExitOk : kExitBadInput;
}

}  // namespace memtrace
