use super::*;
use crate::tools::name::ToolName;

#[test]
fn needs_initialize_points_at_first_call() {
    let out = ToolError::NeedsInitialize {
        reason: "missing thread_id".into(),
        workspace_root: Some("/w".into()),
    }
    .into_output(ToolName::ReadFiles);
    let e = &out.envelope;
    assert_eq!(e.status, Status::NeedsInitialize);
    assert_eq!(Some(ErrorCode::NeedsInitialize), e.error_code);
    let next = e.next_action.as_ref().unwrap();
    assert_eq!(next.tool, "Initialize");
    assert_eq!(next.arguments["workspace_root"], "/w");
    assert!(out.to_result()["isError"].as_bool().unwrap());
}

#[test]
fn conflict_names_the_bound_pair() {
    let out = ToolError::BindingConflict {
        thread_id: "ws_a_1".into(),
        bound_workspace: "/a".into(),
        supplied_workspace: "/b".into(),
    }
    .into_output(ToolName::Initialize);
    assert_eq!(out.envelope.status, Status::Conflict);
    assert_eq!(
        out.envelope.next_action.unwrap().arguments["workspace_root"],
        "/a"
    );
}
