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
            "ring::(anonymous namespace)::fillSide(std::vector<at::Tensor> const&)",
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
