//! PyO3 binding: `numasim._engine`. Strings in, strings out; every engine error becomes a
//! NumasimError subclass and a Rust panic becomes InternalError, never PanicException.

use numasim_engine::{features::FEATURES, scenario, Error};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

create_exception!(_engine, NumasimError, PyException, "Base class of every numasim error.");
create_exception!(_engine, ScenarioError, NumasimError, "The scenario is malformed or impossible; `.errors` lists each problem.");
create_exception!(_engine, CapacityError, NumasimError, "The host cannot hold the simulation.");
create_exception!(_engine, SimulationError, NumasimError, "The simulated kernel failed (e.g. out of memory).");
create_exception!(_engine, InternalError, NumasimError, "An engine bug (a broken invariant or a caught panic).");

enum Failure {
    Engine(Error),
    Panic(String),
}

/// Run `f` without the GIL and turn a panic into a value (polars' enter_polars, for numasim).
fn enter_engine<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, Error> + Send) -> Result<T, Failure> {
    py.allow_threads(|| match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Failure::Engine(e)),
        Err(payload) => {
            let msg = payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_else(|| "unknown panic".into());
            Err(Failure::Panic(msg))
        }
    })
}

fn to_pyerr(py: Python<'_>, f: Failure) -> PyErr {
    match f {
        Failure::Panic(msg) => InternalError::new_err(format!("numasim bug: {msg}")),
        Failure::Engine(Error::Scenario(problems)) => {
            let err = ScenarioError::new_err(Error::Scenario(problems.clone()).to_string());
            let list = PyList::empty(py);
            for p in &problems {
                let d = PyDict::new(py);
                let _ = d.set_item("loc", &p.loc);
                let _ = d.set_item("kind", &p.kind);
                let _ = d.set_item("msg", &p.msg);
                let _ = list.append(d);
            }
            let _ = err.value(py).setattr("errors", list);
            err
        }
        Failure::Engine(e @ Error::Capacity { .. }) => CapacityError::new_err(e.to_string()),
        Failure::Engine(e @ (Error::OutOfMemory { .. } | Error::NotModelled { .. })) => SimulationError::new_err(e.to_string()),
        Failure::Engine(e) => InternalError::new_err(format!("numasim bug: {e}")),
    }
}

/// Wall time the engine runs without the GIL between two checks for signals (Ctrl-C) and
/// progress calls: a SIGINT stops a run within about this long (plus one tick).
const POLL: Duration = Duration::from_millis(20);

/// Simulated time between two progress calls at most: short runs get several.
const PROGRESS_SLICE_NS: u64 = 50_000_000;

/// Run a scenario given as TOML text; returns the result as JSON text. The engine runs in
/// slices with the GIL released: at most about `POLL` of wall time and, with `progress`, at
/// most `PROGRESS_SLICE_NS` of simulated time. After each slice pending
/// signals are handled (`PyErr_CheckSignals`: Ctrl-C raises KeyboardInterrupt and ends the run)
/// and `progress(sim_ns, max_sim_ns, events, fraction_done)` is called if given (fraction_done:
/// of the workloads' planned work, or of max_sim_ns if further); an exception it raises also
/// stops the run.
#[pyfunction]
#[pyo3(signature = (scenario_toml, host_memory_bytes=None, progress=None))]
fn run(py: Python<'_>, scenario_toml: String, host_memory_bytes: Option<u64>, progress: Option<PyObject>) -> PyResult<String> {
    let mut sim = enter_engine(py, move || numasim_engine::prepare_toml(&scenario_toml, host_memory_bytes)).map_err(|f| to_pyerr(py, f))?;
    loop {
        let now = sim.k.now;
        let until = if progress.is_some() { now + PROGRESS_SLICE_NS } else { u64::MAX };
        let more = enter_engine(py, || {
            let start = Instant::now();
            while sim.step()? {
                if sim.k.now >= until || start.elapsed() >= POLL {
                    return Ok(true);
                }
            }
            Ok(false)
        })
        .map_err(|f| to_pyerr(py, f))?;
        py.check_signals()?;
        if let Some(cb) = &progress {
            let (now, max, events) = sim.progress();
            cb.call1(py, (now, max, events, sim.fraction_done()))?;
        }
        if !more {
            break;
        }
    }
    enter_engine(py, move || Ok(sim.finish()?.to_json().to_string())).map_err(|f| to_pyerr(py, f))
}

/// Validate a scenario; returns the fully resolved scenario as JSON text.
#[pyfunction]
fn resolve(py: Python<'_>, scenario_toml: String) -> PyResult<String> {
    enter_engine(py, move || {
        let s = numasim_engine::parse_scenario(&scenario_toml)?;
        Ok(serde_json::to_string(&s).unwrap_or_default())
    })
    .map_err(|f| to_pyerr(py, f))
}

/// Host memory (bytes) a scenario would need.
#[pyfunction]
fn estimate_host_bytes(py: Python<'_>, scenario_toml: String) -> PyResult<u64> {
    enter_engine(py, move || Ok(numasim_engine::estimate_host_bytes(&numasim_engine::parse_scenario(&scenario_toml)?))).map_err(|f| to_pyerr(py, f))
}

#[pyfunction]
fn machine_profiles() -> Vec<&'static str> {
    scenario::machine_profile_names()
}

#[pyfunction]
fn machine_profile_toml(py: Python<'_>, name: &str) -> PyResult<&'static str> {
    scenario::machine_profile_toml(name).ok_or_else(|| {
        let known = scenario::machine_profile_names().join(", ");
        let e = Error::scenario("machine.profile", "invalid_value", format!("unknown machine profile `{name}`, expected one of {known}"));
        to_pyerr(py, Failure::Engine(e))
    })
}

/// The feature table as JSON text.
#[pyfunction]
fn features() -> String {
    serde_json::to_string(FEATURES).unwrap_or_default()
}

/// The kernel versions, the mechanism table (variants.rs) and, per version, the index of each
/// mechanism's variant and each feature's value, as JSON text.
#[pyfunction]
fn kernels() -> String {
    use numasim_engine::{kernels, variants::MECHANISMS};
    let profiles: serde_json::Map<String, serde_json::Value> = kernels::KERNEL_VERSIONS
        .iter()
        .filter_map(|&v| {
            let (vars, feats) = (kernels::kernel_variants(v)?, kernels::kernel_features(v)?);
            let variants: Vec<usize> = (0..MECHANISMS.len()).map(|i| vars.get(i)).collect();
            let features: Vec<bool> = (0..FEATURES.len()).map(|i| feats.get(i)).collect();
            Some((v.to_string(), serde_json::json!({"variants": variants, "features": features})))
        })
        .collect();
    serde_json::json!({
        "versions": kernels::KERNEL_VERSIONS,
        "default": kernels::DEFAULT_VERSION,
        "mechanisms": MECHANISMS,
        "features": FEATURES,
        "profiles": profiles,
    })
    .to_string()
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("NumasimError", py.get_type::<NumasimError>())?;
    m.add("ScenarioError", py.get_type::<ScenarioError>())?;
    m.add("CapacityError", py.get_type::<CapacityError>())?;
    m.add("SimulationError", py.get_type::<SimulationError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_host_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(machine_profiles, m)?)?;
    m.add_function(wrap_pyfunction!(machine_profile_toml, m)?)?;
    m.add_function(wrap_pyfunction!(features, m)?)?;
    m.add_function(wrap_pyfunction!(kernels, m)?)?;
    Ok(())
}
