"""epsim_recorder: records per-expert token counts of a PyTorch MoE model's routers into
epsim-counts-jsonl files (one per source rank) that `epsim trace import counts-jsonl` reads.

    rec = Recorder(model, "counts/", provenance="my model, run 17")
    with rec.record(step, micro_batch): loss = model(batch) ...
    rec.close()
"""

from .adapters import (BUILT_IN, DeepSeekGate, HFSparseMoe, MegatronTopKRouter, RouterSite,
                       TopKOutput, find_sites, layer_id_from_name)
from .counts_writer import FORMAT, VERSION, CountsFileWriter, header_line
from .recorder import Recorder, count_into, resolve_ranks

__all__ = ["BUILT_IN", "CountsFileWriter", "DeepSeekGate", "FORMAT", "HFSparseMoe",
           "MegatronTopKRouter", "Recorder", "RouterSite", "TopKOutput", "VERSION", "count_into",
           "find_sites", "header_line", "layer_id_from_name", "resolve_ranks"]
