//! Ranks as devices (feature `mpi`): under `mpirun`, every rank runs the
//! same command; a device name carries its rank (`cpu@0,cpu@1`,
//! `cpu:0@0,cpu:1@0,cpu@1`; a bare name is on rank 0), and each rank opens
//! only its own devices. Rank 0 prints.

use anyhow::Result;
use baton_mpi::{local_devices, parse_ranked, RemoteBound, World};

use crate::cli::device_table::{lines, local_rows, print};

/// The features column's width on every rank (each formats its own
/// lines): room for the longest extension list the kernels report
/// (AVX-512's, 58 characters).
fn features_width() -> usize {
    58
}

/// Whether this process was started by `mpirun` (Open MPI, MPICH or a
/// PMIx launcher set these).
pub fn launched_by_mpirun() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"].iter().any(|v| std::env::var_os(v).is_some())
}

/// `baton devices` over every rank: each rank describes the devices of the
/// list that carry its rank (or, without a list, all of its machine's),
/// rank 0 prints every rank's, names suffixed with `@RANK`. A rank that
/// cannot open its devices makes every rank fail with its error.
pub fn devices(list: Option<&str>, json: bool) -> Result<()> {
    let world = World::init()?;
    let comm = world.communicator()?;
    let bound = RemoteBound::from_env();
    let (rank, size) = (world.rank(), world.size());
    // Every rank runs the same command (SPMD): a rank started with other
    // arguments is a bad launch, an error on every rank.
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Every rank learns the disagreement; each prints it before they meet
    // once more, so that mpirun does not end a rank before it has said why.
    let agreed = comm.agree("the command line", format!("{args:?}").as_bytes(), &bound);
    super::rank_model::every_rank(&comm, &bound, agreed.map_err(anyhow::Error::from))?;
    // Checked on every rank, before any device is opened: the same list
    // gives the same error everywhere; it goes through the exchange below,
    // so no rank ends the job before every rank has said it.
    let described = match list.map(|list| parse_ranked(list, size)) {
        None => local_rows(None),
        Some(Err(e)) => Err(e.into()),
        Some(Ok(ranked)) => match local_devices(&ranked, rank).join(",") {
            mine if mine.is_empty() => Ok((Vec::new(), None)),
            mine => local_rows(Some(&mine)),
        },
    };
    // Every rank learns every rank's outcome: `ok` and its lines, or `error`
    // and the message.
    let mine = match &described {
        Ok((rows, _)) => format!("ok\n{}", lines(rows, json, &format!("@{rank}"), features_width()).join("\n")),
        Err(e) => format!("error\n{e:#}"),
    };
    let all = comm.all_gather_bytes(mine.as_bytes(), &bound)?;
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (r, said) in all.iter().enumerate() {
        let said = String::from_utf8_lossy(said);
        let (status, text) = said.split_once('\n').unwrap_or((&said, ""));
        match status {
            "ok" => rows.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string)),
            _ => failures.push(format!("rank {r}: {text}")),
        }
    }
    if !failures.is_empty() {
        let first = failures[0].split_once(": ").map_or("", |(_, why)| why);
        let error = if failures.len() == size && failures.iter().all(|f| f.ends_with(first)) {
            anyhow::anyhow!("on every rank: {first}")
        } else {
            anyhow::anyhow!("{} of {size} rank(s) failed: {}", failures.len(), failures.join("; "))
        };
        // Each rank prints it before they meet once more, so that mpirun
        // does not end a rank before it has said why.
        return super::rank_model::every_rank(&comm, &bound, Err(error));
    }
    if rank == 0 {
        let note = described.ok().and_then(|(_, note)| note);
        print(&rows, json, note.as_deref(), features_width());
    }
    Ok(())
}
