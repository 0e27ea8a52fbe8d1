//! MATRIX's evaluation on the namespace testbed (`bolt bench matrix`): DAG jobs whose
//! tasks read data on the hosts, placed by MATRIX's Algorithm 1.

pub mod cluster;
