"""scripts/call_walk.py's reading of its inputs, against the formats it reads: callgrind's
output format (valgrind's manual, "Callgrind Format Specification": a name is given once with
its "(id)" and referred to by the id alone afterwards; "calls=" follows the "cfn=" it counts)
and the C++ names `nm -C` and callgrind print. The walk itself needs valgrind and a build
(docs/architecture.md gives its figures); these cases need neither."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import call_walk  # noqa: E402


def test_our_functions_and_the_libraries_templates_told_apart():
    ours = ["ring::Communicator::run(ring::PreparedCall const&)",
            "void ring::directAllReduce<ring::MailboxRound>(ring::MailboxRound&, char*)",
            "ring::(anonymous namespace)::viewShapes(std::vector<at::Tensor> const&)",
            "long ring::(anonymous namespace)::sliceElemsOf<4>(long)"]
    theirs = ["std::vector<ring::Step, std::allocator<ring::Step> >::reserve(unsigned long)",
              "std::__cxx11::basic_string<char>::_M_assign(std::__cxx11::basic_string<char> const&)",
              "c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::retain_()",
              "void std::deque<std::pair<unsigned long, ring::WorkQueue::Task> >::_M_push_back()"]
    assert [call_walk.is_ours(n) for n in ours] == [True] * len(ours)
    assert [call_walk.is_ours(n) for n in theirs] == [False] * len(theirs)


def test_calls_read_with_compressed_names(tmp_path):
    f = tmp_path / "callgrind.out"
    f.write_text("\n".join([
        "version: 1", "events: Ir",
        "fn=(1) ring::RingBackend::run(x)",
        "10 5",
        "cfn=(2) ring::WorkQueue::push(y)",
        "calls=3 0",
        "11 40",
        "fn=(2)",
        "20 7",
        "cfn=(3) ring::Communicator::prepare(z)",
        "calls=3 0",
        "21 9",
        "fn=(1)",
        "cfn=(2)",
        "calls=2 0",
        "12 8",
        "totals: 69", ""]))
    assert call_walk.call_records(str(f)) == [
        ("ring::RingBackend::run(x)", "ring::WorkQueue::push(y)", 3),
        ("ring::WorkQueue::push(y)", "ring::Communicator::prepare(z)", 3),
        ("ring::RingBackend::run(x)", "ring::WorkQueue::push(y)", 2),
    ]


def _file_of(owner):
    return lambda name: owner.get(name)


def test_a_call_through_library_code_is_an_edge_between_the_two_files():
    # backend.cc's push -> std::function's invoker (no file) -> a lambda of backend.cc: no edge;
    # runner.cc's run -> invoker -> executor.cc's allReduce: an edge, runner -> executor.
    owner = {"push": "backend.cc", "lambda": "backend.cc", "run": "runner.cc",
             "allReduce": "executor.cc"}
    records = [("push", "std::_Function_handler::_M_invoke", 1),
               ("std::_Function_handler::_M_invoke", "lambda", 1),
               ("push", "run", 1),
               ("run", "std::__invoke", 1), ("std::__invoke", "allReduce", 1)]
    assert call_walk.file_edges(records, _file_of(owner)) == {
        ("backend.cc", "runner.cc"), ("runner.cc", "executor.cc")}
    assert call_walk.entered_again({("backend.cc", "runner.cc"),
                                    ("runner.cc", "executor.cc")}) == []


def test_files_that_call_each_other_are_named_once_per_cycle():
    # a -> b -> c -> a is one cycle of three; d -> e -> d another; a -> d joins none of them.
    edges = {("a", "b"), ("b", "c"), ("c", "a"), ("a", "d"), ("d", "e"), ("e", "d")}
    assert call_walk.entered_again(edges) == [("a", "b", "c"), ("d", "e")]
