#include "sim/report/perfetto_writer.hpp"

#include <cstdio>

namespace epsim {

namespace {

constexpr Track kTracks[] = {Track::compute, Track::comm_kernel, Track::copy_engine,
                             Track::nvlink_out, Track::nic_out, Track::host_cpu};

std::string us(Time_ps ps) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%lld.%06lld", static_cast<long long>(ps / kPsPerUs),
                static_cast<long long>(ps % kPsPerUs));
  return buf;
}

bool is_flow(Track t) { return t == Track::nvlink_out || t == Track::nic_out; }

}  // namespace

PerfettoWriter::PerfettoWriter(std::ostream& out, int num_gpus, int gpus_per_node) : out_(out) {
  out_ << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  for (int g = 0; g < num_gpus; ++g) {
    emit("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(g) +
         ",\"args\":{\"name\":\"gpu " + std::to_string(g) + " (node " + std::to_string(g / gpus_per_node) + ")\"}}");
    emit("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + std::to_string(g) +
         ",\"args\":{\"sort_index\":" + std::to_string(g) + "}}");
    for (Track t : kTracks)
      emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(g) +
           ",\"tid\":" + std::to_string(static_cast<int>(t)) + ",\"args\":{\"name\":\"" + to_string(t) + "\"}}");
  }
}

void PerfettoWriter::emit(const std::string& event_json) {
  if (!first_) out_ << ",\n";
  first_ = false;
  out_ << event_json;
}

void PerfettoWriter::add(const Timeline& timeline, Time_ps offset_ps, const std::string& label) {
  for (const TimelineEvent& e : timeline.events) {
    const std::string pid = std::to_string(e.gpu);
    const std::string tid = std::to_string(static_cast<int>(e.track));
    const std::string name = e.name;
    char bytes[48];
    std::snprintf(bytes, sizeof bytes, "%.0f", e.bytes);
    const std::string args = "{\"layer\":\"" + label + "\",\"pass\":\"" +
                             (e.pass == Pass::forward ? "forward" : "backward") + "\",\"bytes\":" + bytes + "}";
    if (is_flow(e.track)) {
      const std::string id = std::to_string(next_async_id_++);
      const std::string common = "\"cat\":\"" + std::string(to_string(e.track)) + "\",\"name\":\"" + name +
                                 "\",\"id\":" + id + ",\"pid\":" + pid + ",\"tid\":" + tid;
      emit("{\"ph\":\"b\"," + common + ",\"ts\":" + us(e.start_ps + offset_ps) + ",\"args\":" + args + "}");
      emit("{\"ph\":\"e\"," + common + ",\"ts\":" + us(e.end_ps + offset_ps) + "}");
    } else {
      emit("{\"ph\":\"X\",\"name\":\"" + name + "\",\"pid\":" + pid + ",\"tid\":" + tid +
           ",\"ts\":" + us(e.start_ps + offset_ps) + ",\"dur\":" + us(e.end_ps - e.start_ps) + ",\"args\":" + args + "}");
    }
  }
}

void PerfettoWriter::close() {
  out_ << "\n]}\n";
}

}  // namespace epsim
