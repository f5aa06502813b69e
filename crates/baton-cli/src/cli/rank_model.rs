//! A model over ranks (feature `mpi`): under `mpirun`, with a device list
//! whose names carry ranks (`cpu@0,cpu@1`), every rank runs the same
//! command and loads only its own devices' layers; rank 0 prints.
//!
//! Before any weight is loaded, the ranks check that they were started
//! alike: the same command line, and the same model file (its size and a
//! hash of its first MiB: the header, metadata and tensor table). A
//! mismatch, a bad device list or a device that fails to open is an error
//! on every rank.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use baton_composite::CompositeDevice;
use baton_core::backend::Device;
use baton_core::DType;
use baton_model::{LoadOptions, Model};
use baton_mpi::{local_devices, parse_ranked, MpiCollective, RankEdges, RemoteBound, RemoteDevice, Transport, World};
use baton_sched::{RemoteEdges, SchedError};

use super::args::ModelArgs;
use baton_load::SplitMode;

use super::choices::{gate_policy, RankCollective};
use crate::util::reported::Reported;

/// Whether `--devices` places devices on ranks (a name with `@`).
pub fn names_ranks(list: &str) -> bool {
    list.contains('@')
}

/// What a server over ranks speaks on besides the model's own traffic
/// (`baton serve`): a communicator of its own, the bound of a remote wait,
/// and this rank.
pub struct RankLink {
    /// The communicator of the server's calls (`baton_serve`'s mirror).
    pub comm: baton_mpi::Comm,
    /// How long a remote wait may take.
    pub bound: RemoteBound,
    /// This process's rank, and the job's size.
    pub rank: usize,
    /// Ranks in the job.
    pub size: usize,
}

/// Loads the model over the ranks of the job (see the module's docs), with
/// a [`RankLink`] for a server.
pub fn load_linked(args: &ModelArgs, path: &Path, options: &LoadOptions) -> Result<(Model, RankLink)> {
    let world = Arc::new(World::init()?);
    let comm = world.communicator()?;
    // Made by every rank in the same order (a collective), before the
    // model's own.
    let link = RankLink {
        comm: world.communicator()?,
        bound: RemoteBound::from_env(),
        rank: world.rank(),
        size: world.size(),
    };
    let bound = RemoteBound::from_env();
    let (rank, size) = (world.rank(), world.size());
    let (ranked, opened) = every_rank(&comm, &bound, launch_checks(&comm, &bound, args, path, rank, size))?;
    let mut local = opened.into_iter();
    let mut devices: Vec<Arc<dyn Device>> = Vec::with_capacity(ranked.len());
    for d in &ranked {
        devices.push(match d.rank == rank {
            true => local.next().with_context(|| format!("opening {d}"))?,
            false => RemoteDevice::new(d.to_string(), d.rank, DType::ALL.to_vec()),
        });
    }
    let device_ranks: Vec<usize> = ranked.iter().map(|d| d.rank).collect();
    if rank != 0 {
        silence_stdout()?;
    }
    if args.split_mode == SplitMode::Tensor {
        return Ok((load_tensor(args, path, options, world, devices, device_ranks, bound)?, link));
    }
    let edges =
        |runner: &baton_sched::Runner| -> Result<Arc<dyn RemoteEdges>, SchedError> {
            let edges = RankEdges::new(&world, runner, &device_ranks, bound.deadline)
                .map_err(|e| SchedError::Remote { from: 0, to: 0, cause: format!("connecting the ranks: {e}") })?;
            Ok(Arc::new(edges.keeping(world.clone())))
        };
    // Under -sm expert (`options.expert_split`), every layer on the first
    // device and each rank's device holding its share of the experts.
    Ok((Model::load_over_ranks(path, devices, options, &edges)?, link))
}

/// Loads the model tensor parallel over the ranks: a composite device over
/// the device list, this rank's device real and the others stand-ins, led
/// by this rank's device, its gates over MPI ([`MpiCollective`]).
fn load_tensor(
    args: &ModelArgs,
    path: &Path,
    options: &LoadOptions,
    world: Arc<World>,
    devices: Vec<Arc<dyn Device>>,
    device_ranks: Vec<usize>,
    bound: RemoteBound,
) -> Result<Model> {
    let transport = match args.rank_collective {
        RankCollective::Mpi => Transport::Native,
        RankCollective::Butterfly => Transport::Butterfly,
    };
    let collective = MpiCollective::new(world, device_ranks, transport, bound.deadline)?;
    let leader = collective.local_device();
    let policy = gate_policy(args.gate_policy);
    let composite = CompositeDevice::with_collective(devices, policy, Arc::new(collective))
        .and_then(|c| c.with_leader(leader))
        .context("building the composite device over the ranks")?;
    let model = Model::load_tensor_parallel(path, Arc::new(composite), options)?;
    if let (true, Some((device, _))) = (args.sync_profile, model.tensor_parallel()) {
        device.gate_profile().enable(true);
    }
    Ok(model)
}

/// The model file's size and a hash of its first MiB (the header).
fn file_identity(path: &Path) -> std::io::Result<String> {
    use std::hash::Hasher;
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    let mut head = Vec::with_capacity(1 << 20);
    file.by_ref().take(1 << 20).read_to_end(&mut head)?;
    // The same binary on every rank: the same hasher.
    let mut hasher = std::hash::DefaultHasher::new();
    hasher.write(&head);
    Ok(format!("{size} bytes, header hash {:016x}", hasher.finish()))
}

/// Ranks other than 0 print nothing on stdout (rank 0 prints the text and
/// the figures); their errors still go to stderr.
fn silence_stdout() -> Result<()> {
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null").context("opening /dev/null")?;
    use std::os::fd::AsRawFd;
    // SAFETY: both descriptors are open (stdout is the process's; `null` is
    // alive for the call); dup2 only replaces what descriptor 1 refers to.
    if unsafe { libc::dup2(null.as_raw_fd(), 1) } < 0 {
        bail!("silencing stdout: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// The devices by rank and this rank's opened devices.
type Launch = (Vec<baton_mpi::RankedDevice>, Vec<Arc<dyn Device>>);

/// The checks every rank makes before any weight is loaded: the same
/// command line and model file, a device list the job can hold, every
/// rank's devices opened. Each failure is every rank's (agreed through
/// collectives), so every rank returns it.
fn launch_checks(
    comm: &baton_mpi::Comm,
    bound: &RemoteBound,
    args: &ModelArgs,
    path: &Path,
    rank: usize,
    size: usize,
) -> Result<Launch> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    comm.agree("the command line", format!("{argv:?}").as_bytes(), bound)?;
    let identity = file_identity(path).unwrap_or_else(|e| format!("unreadable ({e})"));
    comm.agree(&format!("the model file {}", path.display()), identity.as_bytes(), bound)?;
    // The same arguments everywhere: these errors are every rank's.
    let ranked = parse_ranked(&args.devices, size)?;
    match args.split_mode {
        SplitMode::None => bail!("over ranks, --split-mode none has nothing to split: name one device"),
        SplitMode::Tensor => {
            let mut ranks: Vec<usize> = ranked.iter().map(|d| d.rank).collect();
            ranks.sort_unstable();
            if ranks != (0..size).collect::<Vec<_>>() {
                bail!("--split-mode tensor over ranks needs one device on each of the job's {size} ranks (such as cpu@0,cpu@1), got {}", args.devices);
            }
        }
        SplitMode::Layer | SplitMode::Expert => {}
    }
    let mine = local_devices(&ranked, rank).join(",");
    let opened = match mine.is_empty() {
        true => Ok(Vec::new()),
        false => super::devices::open(&mine, args.threads),
    };
    // Every rank learns whether every rank opened its devices.
    let said = match &opened {
        Ok(_) => String::new(),
        Err(e) => format!("{e:#}"),
    };
    let all = comm.all_gather_bytes(said.as_bytes(), bound)?;
    let failures: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(_, said)| !said.is_empty())
        .map(|(r, said)| format!("rank {r}: {}", String::from_utf8_lossy(said)))
        .collect();
    if !failures.is_empty() {
        bail!("opening the devices failed on {} of {size} rank(s): {}", failures.len(), failures.join("; "));
    }
    Ok((ranked, opened?))
}

/// `result`, which every rank shares; on an error, this rank prints it and
/// meets the others once more before returning [`Reported`], so no rank
/// exits (and has `mpirun` kill the rest) before each has said why.
pub(crate) fn every_rank<T>(comm: &baton_mpi::Comm, bound: &RemoteBound, result: Result<T>) -> Result<T> {
    result.map_err(|e| {
        crate::util::reported::print_error(&format!("{e:#}"));
        // Best effort: a rank that cannot meet the others has printed too.
        let _ = comm.all_gather_bytes(&[], bound);
        anyhow::Error::new(Reported)
    })
}
