//! gnomon-client: queries Roughtime servers of every version over UDP and
//! TCP, runs the measurement sequence and keeps the proof.
