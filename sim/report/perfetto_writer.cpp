#include "sim/report/perfetto_writer.hpp"

#include <charconv>
#include <cstdio>

namespace epsim {

namespace {

constexpr Track kTracks[] = {Track::compute, Track::comm_kernel, Track::copy_engine,
                             Track::nvlink_out, Track::nic_out, Track::host_cpu};

// Appends `value` in decimal.
void append_int(std::string& out, long long value) {
  char buf[24];
  out.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, value).ptr - buf));
}

// Appends `ps` as microseconds with six decimals, as printf's "%lld.%06lld" of its quotient and
// remainder would.
void append_us(std::string& out, Time_ps ps) {
  if (ps < 0) {  // not reached by a layer's times; printf keeps the remainder's sign as before
    char buf[48];
    const int n = std::snprintf(buf, sizeof buf, "%lld.%06lld", static_cast<long long>(ps / kPsPerUs),
                                static_cast<long long>(ps % kPsPerUs));
    out.append(buf, static_cast<std::size_t>(n));
    return;
  }
  append_int(out, static_cast<long long>(ps / kPsPerUs));
  char digits[6];
  long long rest = static_cast<long long>(ps % kPsPerUs);
  for (int i = 5; i >= 0; --i, rest /= 10) digits[i] = static_cast<char>('0' + rest % 10);
  out.push_back('.');
  out.append(digits, sizeof digits);
}

// Appends `bytes` rounded to a whole number, as printf's "%.0f" (std::to_chars with a precision is
// specified as printf in the C locale).
void append_bytes(std::string& out, double bytes) {
  char buf[400];  // the longest double in fixed notation has 309 digits
  out.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, bytes, std::chars_format::fixed, 0).ptr - buf));
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

void PerfettoWriter::begin_event() {
  if (!first_) buffer_.append(",\n");
  first_ = false;
}

void PerfettoWriter::add(const Timeline& timeline, Time_ps offset_ps, const std::string& label) {
  // Each event is written into one buffer, which goes to the stream a block at a time: a wide layer
  // draws over a million events, and building each from temporary strings took longer than
  // simulating the layer.
  constexpr std::size_t kFlush_bytes = std::size_t{1} << 20;
  buffer_.clear();
  for (const TimelineEvent& e : timeline.events) {
    // The fields every event has after its kind: name, ids and start.
    const auto ids = [&](std::string& out) {
      out.append(",\"pid\":");
      append_int(out, e.gpu);
      out.append(",\"tid\":");
      append_int(out, static_cast<int>(e.track));
    };
    const auto args = [&](std::string& out) {
      out.append(",\"args\":{\"layer\":\"").append(label).append("\",\"pass\":\"");
      out.append(e.pass == Pass::forward ? "forward" : "backward").append("\",\"bytes\":");
      append_bytes(out, e.bytes);
      out.append("}}");
    };
    if (is_flow(e.track)) {
      const long long id = next_async_id_++;
      for (const bool begin : {true, false}) {
        begin_event();
        buffer_.append(begin ? "{\"ph\":\"b\"" : "{\"ph\":\"e\"").append(",\"cat\":\"").append(to_string(e.track));
        buffer_.append("\",\"name\":\"").append(e.name).append("\",\"id\":");
        append_int(buffer_, id);
        ids(buffer_);
        buffer_.append(",\"ts\":");
        append_us(buffer_, (begin ? e.start_ps : e.end_ps) + offset_ps);
        if (begin) args(buffer_);
        else buffer_.push_back('}');
      }
    } else {
      begin_event();
      buffer_.append("{\"ph\":\"X\",\"name\":\"").append(e.name).push_back('"');
      ids(buffer_);
      buffer_.append(",\"ts\":");
      append_us(buffer_, e.start_ps + offset_ps);
      buffer_.append(",\"dur\":");
      append_us(buffer_, e.end_ps - e.start_ps);
      args(buffer_);
    }
    if (buffer_.size() >= kFlush_bytes) {
      out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
      buffer_.clear();
    }
  }
  out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  buffer_.clear();
}

void PerfettoWriter::close() {
  out_ << "\n]}\n";
}

}  // namespace epsim
