//! tiercache-workload (under construction).
