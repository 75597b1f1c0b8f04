// Client rules: what a sampled client does with the model it receives (DESIGN.md "One method = two
// small parts"). The run loop hands a rule a ClientTask whose model already holds the round's starting
// state (the global state, or the server rule's start state for this client); the rule trains it in
// place. The upload is then `model state - start state` over the SHARED columns only, computed by the
// run loop (parameters and BatchNorm buffers of the shared part, in model order).
//
// Personalised FL (DESIGN.md "Personalized FL") adds optional answers a rule may give:
//   traits().shared   what is uploaded: every column (FedAvg), the body (FedRep: the head stays), or
//                     nothing (local training). The server rule sees only these columns.
//   personal_model()  the client's own model for personalised evaluation (FedRep: global body + own head;
//                     Ditto: its second model); false = the global model.
//   post_step()       a step applied to the client's own model before it is evaluated (Simple-Tuning,
//                     FedAvg-FT's fine-tuning; fl/clients/post_step.h). Empty = none.
//   received_model()  the model the client last received, when the server sends it one of its own
//                     (FedCAP's customised model); false = the global model.
// Personal parts live in ClientState (checkpointed), never in the rule.
//
// Methods with server-side state (MoFedSAM's momentum, FedSpeed's h_i, FedSMOO's duals) add a
// MethodServer (fl/clients/method_server.h): it writes each sampled client's message before training
// (ClientTask::message), reads extra uploads (ClientResult::extra_upload) and adds its term to the
// server rule's update.
//
// Threads: the run loop calls train() for different clients concurrently, each on its own Model
// replica and ClientState, on a thread whose kernels run single-threaded. A rule keeps no mutable
// members; anything that must survive to the next round goes into ClientState (checkpointed).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <optional>
#include <span>

#include "data/dataset.h"
#include "data/transforms.h"
#include "fl/base/params.h"
#include "nn/model.h"

namespace bastion {

class Attack;

// Persistent per-client state (personal heads, momentum, FSA layer choice, ...): named float vectors
// and scalars. Empty until a rule writes to it. Saved whole in checkpoints.
struct ClientState {
  std::map<std::string, std::vector<float>> vectors;
  std::map<std::string, double> scalars;
};

// What a method's server part sends a client besides the model (named float vectors).
using ClientMessage = std::map<std::string, std::vector<float>>;

struct ClientTask {
  Model& model;                         // holds the start state on entry; trained in place
  const Dataset& data;                  // the shared training set
  const std::vector<int64_t>& indices;  // this client's training samples
  const TransformSpec& transform;       // per-sample transform (augmentation) for the loader
  ClientState& state;
  int64_t client = 0, round = 0;  // round counts from 1
  uint64_t seed = 0;              // (seed, round, client)-derived: loader shuffling, dropout, ...
  uint64_t client_seed = 0;       // (seed, client)-derived, the same every round (fixed attack choices)
  // Set for a malicious client whose attack acts on data or training (else nullptr). The rule calls
  // attack->poison_loader on its loader, and for Training attacks attack->training_step instead of its
  // own step.
  const Attack* attack = nullptr;
  int64_t attacker_index = 0;  // position in the malicious set (DBA part), valid with attack
  // A second replica of the same architecture for rules that train two models at once (Ditto's
  // personal model); its state is undefined on entry. Null unless the rule asks (traits().second_model).
  Model* second = nullptr;
  // The method server's message for this client this round (fl/clients/method_server.h), or nullptr.
  const ClientMessage* message = nullptr;
};

struct ClientResult {
  double train_loss = 0.0;  // mean over the steps taken
  int64_t steps = 0;
  int64_t samples = 0;                     // samples processed (epochs × local size, or steps × batch)
  int64_t head_steps = 0, body_steps = 0;  // FedRep's phases (steps with only the head / only the body trainable)
  int64_t personal_steps = 0;              // Ditto: steps of the personal model
  std::vector<float> extra_upload;         // sent to the method server besides the update (FedSMOO's mu_i)
  std::string note;                        // what the rule chose for this client this round, written to
                                           // client_notes.csv (FedFSA: its Top-C tensors); empty = none
};

// Which columns of the flat state a client uploads (the rest stays on the client).
enum class SharedPart { All, Body, None };

// A rule's capabilities, read by the run loop and the configuration check (one struct instead of a
// virtual function each, issue 37). The defaults are plain FedAvg-style local training.
struct ClientTraits {
  SharedPart shared = SharedPart::All;  // the columns a client uploads
  // A personal model trained beside the shared one (Ditto, SPMC, FedCAP's personal mode): the run loop
  // then fills ClientTask::second.
  bool second_model = false;
  // train() and the post step run on a CUDA model (run.device = "cuda", fl/core/device_replicas.h): they
  // read and write the model only through autograd, the optimizers and Model::state_values /
  // load_state_values, never through its host spans. false: the rule is refused on the device.
  bool on_device = false;
  // Local training in FedCAP's setting: every client trains every round, not only the sampled ones.
  bool every_client_trains = false;
  // The rule's method server reads the server rule's upload weights (MethodRound::weights; SPMC's
  // coalition): the configuration check then demands a server rule that reports them.
  bool needs_aggregation_weights = false;
};

struct PostSpec;     // fl/clients/post_step.h
class MethodServer;  // fl/clients/method_server.h

// What a rule may read to prepare a client's model for its post step (prepare_post_step).
struct PostStartData {
  const Dataset& data;
  const std::vector<int64_t>& indices;  // the client's training samples
  const TransformSpec& transform;
  uint64_t seed = 0;  // (seed, round, client)-derived
};

class ClientRule {
 public:
  virtual ~ClientRule() = default;
  virtual ClientResult train(ClientTask& task) const = 0;

  // What the run loop needs to know of the rule before it trains (ClientTraits above).
  virtual ClientTraits traits() const { return {}; }
  // Writes the client's own model (D values: parameters then buffers) into `out` from its state and the
  // current global state; returns false when the client's model is the global model. `model` gives the
  // layout (head columns). Called concurrently for different clients: read-only.
  virtual bool personal_model(const ClientState& state, std::span<const float> global, const Model& model,
                              std::span<float> out) const {
    return false;
  }
  // Writes the model the client received at its latest participation, when the rule sends clients a
  // model of their own (FedCAP's customised model), and returns true; false: the client received the
  // global model. Personalised evaluation's received-model figure (eval.personal_received). Read-only;
  // called concurrently for different clients.
  virtual bool received_model(const ClientState& state, std::span<float> out) const { return false; }
  // A post-training step the rule always takes (st, fedavg-ft); a [post] section adds one to any rule.
  virtual std::optional<PostSpec> post_step() const;
  // Before a post step: a rule whose client would not tune personal_model() as it stands writes the
  // model to tune into `model` and returns true (FedALA: its adaptive local aggregation of the final
  // global model). `model` holds personal_model() (or the global model) on entry. Read-only on `state`;
  // called concurrently for different clients.
  virtual bool prepare_post_step(const ClientState& state, std::span<const float> global, Model& model,
                                 const PostStartData& data) const {
    return false;
  }
  // The method's server part for `clients` clients and models of `num_parameters` parameters; nullptr
  // (default) when the method keeps no server state besides the server rule's.
  virtual std::unique_ptr<MethodServer> make_method_server(int64_t clients, int64_t num_parameters) const;
};

// fl/clients/sgd.cpp (sgd, and fedavg-ft / st, which are sgd with a personal model or a post step)
const std::vector<ParamSpec>& sgd_client_params();
std::unique_ptr<ClientRule> make_sgd_client(const Params& params);
const std::vector<ParamSpec>& fedavg_ft_client_params();
std::unique_ptr<ClientRule> make_fedavg_ft_client(const Params& params);
const std::vector<ParamSpec>& st_client_params();
std::unique_ptr<ClientRule> make_st_client(const Params& params);
// fl/clients/local.cpp, ditto.cpp, fedrep.cpp
const std::vector<ParamSpec>& local_client_params();
std::unique_ptr<ClientRule> make_local_client(const Params& params);
const std::vector<ParamSpec>& ditto_client_params();
std::unique_ptr<ClientRule> make_ditto_client(const Params& params);
const std::vector<ParamSpec>& fedrep_client_params();
std::unique_ptr<ClientRule> make_fedrep_client(const Params& params);
const std::vector<ParamSpec>& pfedsam_client_params();  // fedrep.cpp: FedRep with SAM on the body
std::unique_ptr<ClientRule> make_pfedsam_client(const Params& params);
// fl/clients/fedala.cpp: adaptive local aggregation of the global model into the local one
const std::vector<ParamSpec>& fedala_client_params();
std::unique_ptr<ClientRule> make_fedala_client(const Params& params);
// fl/clients/fedrod.cpp: FedRoD (balanced-softmax generic head + personal head)
const std::vector<ParamSpec>& fedrod_client_params();
std::unique_ptr<ClientRule> make_fedrod_client(const Params& params);
// fl/clients/sam_family.cpp: FedSAM, MoFedSAM, FedFSA, FedSpeed, FedSMOO (one SAM step, nn/optim.h)
const std::vector<ParamSpec>& fedsam_client_params();
std::unique_ptr<ClientRule> make_fedsam_client(const Params& params);
const std::vector<ParamSpec>& mofedsam_client_params();
std::unique_ptr<ClientRule> make_mofedsam_client(const Params& params);
const std::vector<ParamSpec>& fedfsa_client_params();
std::unique_ptr<ClientRule> make_fedfsa_client(const Params& params);
const std::vector<ParamSpec>& fedspeed_client_params();
std::unique_ptr<ClientRule> make_fedspeed_client(const Params& params);
const std::vector<ParamSpec>& fedsmoo_client_params();
std::unique_ptr<ClientRule> make_fedsmoo_client(const Params& params);
// fl/clients/fedfomo.cpp (+ fedfomo_server.cpp, its method server)
const std::vector<ParamSpec>& fedfomo_client_params();
std::unique_ptr<ClientRule> make_fedfomo_client(const Params& params);

// fl/clients/rsa.cpp: RSA's worker (persistent x_i with the l1 consensus sign term; server rule rsa)
const std::vector<ParamSpec>& rsa_client_params();
std::unique_ptr<ClientRule> make_rsa_client(const Params& params);

// fl/clients/fedcap.cpp: FedCAP's client (Ditto-style personal model beside the customised model)
const std::vector<ParamSpec>& fedcap_client_params();
std::unique_ptr<ClientRule> make_fedcap_client(const Params& params);

// fl/clients/fedcr.cpp: FedCR (stochastic encoder cnn-fedcr, KL to the server's class Gaussians, personal fc4)
const std::vector<ParamSpec>& fedcr_client_params();
std::unique_ptr<ClientRule> make_fedcr_client(const Params& params);

// fl/clients/spmc.cpp: SPMC's LGAlign (CE gradient aligned with the coalition teacher's distillation gradient)
const std::vector<ParamSpec>& spmc_client_params();
std::unique_ptr<ClientRule> make_spmc_client(const Params& params);

}  // namespace bastion
