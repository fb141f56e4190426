//! Tests of the OpenFlow channel against recorded ovs-ofctl conversations.
