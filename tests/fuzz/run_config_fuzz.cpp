// libFuzzer target for the run-config path: JSON text (parse_json_text's depth bound), the run
// config's validation (parse_run_config), then the model and objective it names
// (Model::from_config, models nested in it, inputs whose lengths a made-up dataset gives, the
// config it writes back read again, its summary,
// make_objective: layers, losses, metrics, weighted_metrics, class_weight),
// its optimizer (make_optimizer, Keras' LossScaleOptimizer wrapper included) and the precision
// its layers' dtype policies and the run's "precision" give (nn::effective_precision,
// nn::layer_precisions), and the pipeline's stages cut from the model
// with what each of four CPU workers holds (cut_into_stages, place_on_devices; each call taken
// as 4 bytes a row: the call probe's forward pass is not fuzzed here).
// Every bad input must end as a tandem::Error (exit code 2 in the CLI) or a JSON syntax error;
// any other exception, a crash or a sanitizer report is a finding.
// Build and run (clang's libFuzzer, an ASan+UBSan build in build-fuzz/):
//   scripts/fuzz run_config_fuzz 60
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/dtype_policy.hpp"
#include "nn/objective.hpp"
#include "optim/optimizer.hpp"
#include "parallel/placement.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "train/run_config.hpp"
#include "util/json_text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json config = tandem::parse_json_text(text);
    const tandem::RunConfig rc = tandem::parse_run_config(config, {});
    // Lengths an input leaves to the data (Keras' None) from a made-up dataset of two arrays: a
    // length that follows the input's size, and a (3, 5) one.
    const tandem::Model::DataInputShapes data_shapes = [size](const std::vector<tandem::Shape>&) {
      return std::vector<tandem::Shape>{{static_cast<std::int64_t>(size % 7) + 1}, {3, 5}};
    };
    const auto model = tandem::Model::from_config(rc.model, "model", rc.seed, data_shapes);
    // What a checkpoint and `tandem summary` write of it (a nested model's config written back).
    tandem::Model::from_config(model->config(), "model", rc.seed, data_shapes);
    model->summary();
    tandem::make_objective(rc.loss, rc.loss_weights, rc.metrics, *model, rc.weighted_metrics);
    tandem::make_optimizer(rc.optimizer, "optimizer");
    const tandem::Precision precision =
        tandem::nn::effective_precision(*model, rc.precision, rc.precision_given);
    tandem::nn::layer_precisions(*model, precision);
    if (rc.pipeline.active() && rc.pipeline.stages <= 4 && 4 % rc.pipeline.stages == 0) {
      const tandem::PipelinePlan pipeline{tandem::cut_into_stages(*model, rc.pipeline),
                                          rc.pipeline.microbatches, rc.pipeline.schedule};
      tandem::place_on_devices(*model, tandem::DevicePlan::cpus(4), pipeline,
                               rc.global_batch_size(4 / rc.pipeline.stages), 2,
                               std::vector<std::int64_t>(model->call_count(), 4));
    }
  } catch (const tandem::Error&) {
  } catch (const tandem::JsonTextRefused&) {  // too deep, not UTF-8, a number out of range
  } catch (const nlohmann::json::parse_error&) {
  }
  return 0;
}
